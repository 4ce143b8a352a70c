package slackbot

import (
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// TestAppManifest checks deploy/slack-app-manifest.yaml against what the
// adapter uses: Socket Mode, /gpu unescaped, interactivity, App Home with
// DMs, app_home_opened, and exactly the scopes of the Web API methods
// called (commands; chat.postMessage/update/postEphemeral → chat:write;
// conversations.open → im:write; the files upload flow → files:write;
// conversations.history and .replies after a restart → the history scopes).
func TestAppManifest(t *testing.T) {
	data, err := os.ReadFile("../../deploy/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Features struct {
			AppHome struct {
				Home     bool `yaml:"home_tab_enabled"`
				Messages bool `yaml:"messages_tab_enabled"`
			} `yaml:"app_home"`
			SlashCommands []struct {
				Command      string `yaml:"command"`
				ShouldEscape *bool  `yaml:"should_escape"`
			} `yaml:"slash_commands"`
		} `yaml:"features"`
		OAuth struct {
			Scopes struct {
				Bot  []string `yaml:"bot"`
				User []string `yaml:"user"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			Interactivity struct {
				Enabled bool `yaml:"is_enabled"`
			} `yaml:"interactivity"`
			SocketMode bool `yaml:"socket_mode_enabled"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if !m.Settings.SocketMode || !m.Settings.Interactivity.Enabled {
		t.Errorf("socket mode %v, interactivity %v: want both on", m.Settings.SocketMode, m.Settings.Interactivity.Enabled)
	}
	if !m.Features.AppHome.Home || !m.Features.AppHome.Messages {
		t.Errorf("app home %+v: want the home and messages tabs", m.Features.AppHome)
	}
	if len(m.Features.SlashCommands) != 1 || m.Features.SlashCommands[0].Command != "/gpu" ||
		m.Features.SlashCommands[0].ShouldEscape == nil || *m.Features.SlashCommands[0].ShouldEscape {
		t.Errorf("slash commands %+v: want /gpu with should_escape false", m.Features.SlashCommands)
	}
	if d := cmp.Diff([]string{"app_home_opened"}, m.Settings.Events.Bot); d != "" {
		t.Errorf("bot events (-want +got):\n%s", d)
	}
	scopes := slices.Sorted(slices.Values(m.OAuth.Scopes.Bot))
	if d := cmp.Diff([]string{"channels:history", "chat:write", "commands", "files:write", "groups:history", "im:history", "im:write"}, scopes); d != "" {
		t.Errorf("bot scopes (-want +got):\n%s", d)
	}
	if len(m.OAuth.Scopes.User) > 0 {
		t.Errorf("user scopes %v: want none", m.OAuth.Scopes.User)
	}
}
