package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
)

// TestRunRefusesABadSlackToken: "gpubot" with a token Slack refuses exits
// non-zero with a message that says which token and never shows it.
func TestRunRefusesABadSlackToken(t *testing.T) {
	fake := slackfake.Start(t)
	const badBot = "xoxb-1234-secret-do-not-print"
	cases := map[string]struct {
		env  map[string]string
		want string
		hide []string
	}{
		"bad bot token": {
			env:  map[string]string{"SLACK_BOT_TOKEN": badBot, "SLACK_APP_TOKEN": slackfake.AppToken},
			want: "SLACK_BOT_TOKEN was refused by Slack", hide: []string{badBot},
		},
		"bad app token from a file": {
			env:  map[string]string{"SLACK_BOT_TOKEN": slackfake.BotToken, "SLACK_APP_TOKEN_FILE": "app-token"},
			want: "SLACK_APP_TOKEN was refused by Slack", hide: []string{"xapp-9876-secret"},
		},
		"missing app token": {
			env:  map[string]string{"SLACK_BOT_TOKEN": badBot},
			want: "SLACK_APP_TOKEN is not set", hide: []string{badBot},
		},
		"unreadable token file": {
			env:  map[string]string{"SLACK_BOT_TOKEN_FILE": "nonexistent", "SLACK_APP_TOKEN": slackfake.AppToken},
			want: "reading SLACK_BOT_TOKEN_FILE",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "app-token"), []byte("xapp-9876-secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN_FILE", "SLACK_APP_TOKEN_FILE"} {
				t.Setenv(k, "")
			}
			t.Setenv("SLACK_API_URL", fake.APIURL())
			for k, v := range tc.env {
				if strings.HasSuffix(k, "_FILE") {
					v = filepath.Join(dir, v)
				}
				t.Setenv(k, v)
			}
			code, out, errw := runCLI(t, "", "--data-dir", dir)
			if code != 1 || !strings.Contains(errw, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, errw, tc.want)
			}
			for _, h := range tc.hide {
				if strings.Contains(out+errw, h) {
					t.Errorf("output shows the token:\n%s%s", out, errw)
				}
			}
		})
	}
}
