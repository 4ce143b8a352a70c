package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/deploy"
)

func TestSlackSection(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want Slack
		errs []string
	}{
		"absent": {},
		"all keys": {
			yaml: "slack:\n  apiURL: https://slack-gov.com/api/\n  messagesPerSecond: 0.5\n  burst: 2\n  matchByEmail: true\n",
			want: Slack{APIURL: "https://slack-gov.com/api/", MessagesPerSecond: 0.5, Burst: 2, MatchByEmail: true},
		},
		"empty section": {yaml: "slack:\n"},
		"bad url": {
			yaml: "slack:\n  apiURL: slack.com\n",
			errs: []string{`slack.apiURL: "slack.com" is not a Web API base URL`},
		},
		"bad values": {
			yaml: "slack:\n  messagesPerSecond: 0\n  burst: 0\n",
			errs: []string{"slack.messagesPerSecond: must be more than 0", "slack.burst: must be at least 1"},
		},
		"not a boolean": {
			yaml: "slack:\n  matchByEmail: yes please\n",
			errs: []string{"slack.matchByEmail: "},
		},
		"too fast": {
			yaml: "slack:\n  messagesPerSecond: 1000\n",
			errs: []string{"slack.messagesPerSecond: must be at most 100"},
		},
		"typo": {
			yaml: "slack:\n  apiUrl: https://slack.com/api/\n",
			errs: []string{`slack.apiUrl: unknown key "apiUrl"; did you mean "apiURL"?`},
		},
		"tokens are not config": {
			yaml: "slack:\n  botToken: xoxb-1\n",
			errs: []string{`slack.botToken: unknown key "botToken"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("gpubot.yaml", []byte(string(deploy.ExampleConfig)+"\n"+tc.yaml))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("no error; want %q", tc.errs)
				}
				for _, e := range tc.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error lacks %q:\n%v", e, err)
					}
				}
				if !strings.Contains(err.Error(), "gpubot.yaml:") {
					t.Errorf("error does not name the file and line:\n%v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, c.Slack()); d != "" {
				t.Errorf("Slack() (-want +got):\n%s", d)
			}
		})
	}
}
