package slackfake_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
)

var tsPattern = regexp.MustCompile(`^\d{10}\.\d{6}$`)

func TestChatAndThreads(t *testing.T) {
	s := slackfake.Start(t)
	api := newAPI(s)
	ctx := ctxT(t)
	if r, err := api.AuthTestContext(ctx); err != nil || r.UserID != slackfake.BotUserID || r.BotID != slackfake.BotID {
		t.Fatalf("auth.test = %+v, %v", r, err)
	}
	ch, parent, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("card", false))
	if err != nil || ch != "C0GPU" || !tsPattern.MatchString(parent) {
		t.Fatalf("post = %s %s %v", ch, parent, err)
	}
	last := parent
	for i := range 20 {
		_, ts, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText(fmt.Sprint("reply ", i), false), slack.MsgOptionTS(parent))
		if err != nil {
			t.Fatal(err)
		}
		if ts <= last {
			t.Fatalf("ts %s not after %s", ts, last)
		}
		last = ts
	}
	if th := s.Thread("C0GPU", parent); len(th) != 21 || th[1].ThreadTS != parent {
		t.Errorf("thread has %d messages", len(th))
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0GPU", parent, slack.MsgOptionBlocks(buttonBlocks()...)); err != nil {
		t.Fatal(err)
	}
	m := s.Messages("C0GPU")[0]
	if m.Text != "card" || m.Edits != 1 || m.Blocks == nil {
		t.Errorf("updated = %+v", m)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0GPU", "1.000001", slack.MsgOptionText("x", false)); err == nil || err.Error() != "message_not_found" {
		t.Errorf("update of a missing message: %v", err)
	}
	if _, err := api.PostEphemeralContext(ctx, "C0GPU", "U0BOB", slack.MsgOptionText("only you", false)); err != nil {
		t.Fatal(err)
	}
	if e := s.Ephemerals("U0BOB"); len(e) != 1 || e[0].Text != "only you" {
		t.Errorf("ephemerals = %+v", e)
	}
	link, err := api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "C0GPU", Ts: parent})
	if err != nil || !strings.Contains(link, "/archives/C0GPU/p") {
		t.Errorf("permalink = %q, %v", link, err)
	}

	dm, _, _, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0BOB"}})
	if err != nil || !strings.HasPrefix(dm.ID, "D") {
		t.Fatalf("conversations.open = %+v, %v", dm, err)
	}
	if _, _, err := api.PostMessageContext(ctx, dm.ID, slack.MsgOptionText("your GPUs are ready", false)); err != nil {
		t.Fatal(err)
	}
	if d := s.DMs("U0BOB"); len(d) != 1 || d[0].Text != "your GPUs are ready" {
		t.Errorf("DMs = %+v", d)
	}
	if _, _, err := api.PostMessageContext(ctx, "D999", slack.MsgOptionText("x", false)); err == nil || err.Error() != "channel_not_found" {
		t.Errorf("post to unknown DM: %v", err)
	}

	u, err := api.GetUserInfoContext(ctx, "U0BOB")
	if err != nil || u.Name != "bob" || u.TZ != "Europe/Berlin" || u.Profile.Email != "bob@example.com" {
		t.Errorf("users.info = %+v, %v", u, err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U0NOBODY"); err == nil || err.Error() != "user_not_found" {
		t.Errorf("unknown user: %v", err)
	}
	if u, err := api.GetUserByEmailContext(ctx, "carol@example.com"); err != nil || u.ID != "U0CAROL" {
		t.Errorf("lookupByEmail = %+v, %v", u, err)
	}
	calls := s.Calls("chat.postMessage")
	if len(calls) == 0 || calls[0].Token != slackfake.BotToken || calls[0].Params.Get("channel") != "C0GPU" || calls[0].Params.Has("token") {
		t.Errorf("calls = %+v", calls[0])
	}
}

func TestFileUpload(t *testing.T) {
	s := slackfake.Start(t)
	api := newAPI(s)
	content := "team,gpu_hours\nml,120\n"
	f, err := api.UploadFileContext(ctxT(t), slack.UploadFileParameters{
		Channel: "C0GPU", Filename: "usage.csv", Title: "Usage", Content: content, FileSize: len(content),
	})
	if err != nil {
		t.Fatal(err)
	}
	files := s.Files()
	if len(files) != 1 || files[0].ID != f.ID || string(files[0].Content) != content || !files[0].Completed ||
		files[0].Title != "Usage" || files[0].Channel != "C0GPU" || files[0].Name != "usage.csv" {
		t.Errorf("files = %+v", files)
	}
	if m := s.Messages("C0GPU"); len(m) != 1 || len(m[0].Files) != 1 || m[0].Files[0] != f.ID {
		t.Errorf("messages = %+v", m)
	}
}

func TestTokens(t *testing.T) {
	s := slackfake.Start(t)
	ctx := ctxT(t)
	for token, want := range map[string]string{
		"xoxb-wrong":       "invalid_auth",
		slackfake.AppToken: "not_allowed_token_type",
	} {
		api := slack.New(token, slack.OptionAPIURL(s.APIURL()))
		if _, _, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("x", false)); err == nil || err.Error() != want {
			t.Errorf("token %s: err = %v, want %s", token, err, want)
		}
	}
	for path, want := range map[string]string{
		"chat.postMessage": "not_authed",
		"reactions.add":    "unknown_method",
	} {
		if code := postForm(t, s.APIURL()+path, "channel=C0GPU&text=x"); code != want {
			t.Errorf("%s without a token: %s, want %s", path, code, want)
		}
	}
	if code := postForm(t, s.APIURL()+"reactions.add", "token="+slackfake.BotToken); code != "unknown_method" {
		t.Errorf("reactions.add: %s, want unknown_method", code)
	}
	if n := len(s.Calls("reactions.add")); n != 2 {
		t.Errorf("%d reactions.add calls recorded, want 2", n)
	}
}

// postForm posts a raw form and returns Slack's error code ("" when ok).
func postForm(t *testing.T, u, form string) string {
	t.Helper()
	resp, err := http.Post(u, "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Error
}

func TestBlockKitLimits(t *testing.T) {
	s := slackfake.Start(t)
	api := newAPI(s)
	ctx := ctxT(t)
	section := func(n int) slack.Block {
		return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("x", n), false, false), nil, nil)
	}
	many := func(n int) []slack.Block {
		var bs []slack.Block
		for range n {
			bs = append(bs, slack.NewDividerBlock())
		}
		return bs
	}
	tests := map[string]struct {
		opts []slack.MsgOption
		want string
	}{
		"50 blocks":        {[]slack.MsgOption{slack.MsgOptionBlocks(many(50)...)}, ""},
		"51 blocks":        {[]slack.MsgOption{slack.MsgOptionBlocks(many(51)...)}, "invalid_blocks"},
		"section 3000":     {[]slack.MsgOption{slack.MsgOptionBlocks(section(3000))}, ""},
		"section 3001":     {[]slack.MsgOption{slack.MsgOptionBlocks(section(3001))}, "invalid_blocks"},
		"empty section":    {[]slack.MsgOption{slack.MsgOptionBlocks(section(0))}, "invalid_blocks"},
		"text 40000":       {[]slack.MsgOption{slack.MsgOptionText(strings.Repeat("y", 40000), false)}, ""},
		"text 40001":       {[]slack.MsgOption{slack.MsgOptionText(strings.Repeat("y", 40001), false)}, "msg_too_long"},
		"no text":          {nil, "no_text"},
		"duplicate blocks": {[]slack.MsgOption{slack.MsgOptionBlocks(buttonBlocks()[0], buttonBlocks()[0])}, "invalid_blocks"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(ctx, "C0GPU", tc.opts...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("err = %q, want %q", got, tc.want)
			}
		})
	}
	form := url.Values{"token": {slackfake.BotToken}, "channel": {"C0GPU"}, "blocks": {`[{"type":"section",`}}
	if code := postForm(t, s.APIURL()+"chat.postMessage", form.Encode()); code != "invalid_blocks_format" {
		t.Errorf("unparsable blocks: %s", code)
	}

	var blocks []slack.Block
	for range 101 {
		blocks = append(blocks, slack.NewDividerBlock())
	}
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: blocks}}
	_, err := api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: "U0ALICE", View: view})
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_arguments" || len(se.ResponseMetadata.Messages) == 0 {
		t.Errorf("101-block view: %#v", err)
	}
}

func TestFaultInjection(t *testing.T) {
	s := slackfake.Start(t)
	api := newAPI(s)
	ctx := ctxT(t)
	s.RateLimit("chat.postMessage", 1, 1500*time.Millisecond)
	_, _, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("err = %#v, want RateLimitedError{2s}", err)
	}
	s.FailNext("chat.postMessage", "channel_is_archived")
	if _, _, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("x", false)); err == nil || err.Error() != "channel_is_archived" {
		t.Errorf("FailNext: %v", err)
	}
	s.FailNextStatus("chat.update", http.StatusServiceUnavailable)
	var sc slack.StatusCodeError
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0GPU", "1.1", slack.MsgOptionText("x", false)); !errors.As(err, &sc) || sc.Code != 503 {
		t.Errorf("FailNextStatus: %#v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("x", false)); err != nil {
		t.Errorf("after the faults: %v", err)
	}
	calls := s.Calls("chat.postMessage")
	if len(calls) != 3 || calls[0].Status != 429 || calls[1].Error != "channel_is_archived" || calls[2].Error != "" {
		t.Errorf("calls = %+v", calls)
	}
}

// TestWebhookResponseURL: slack.PostWebhookCustomHTTPContext checks only the
// HTTP status, so response_url errors must be 4xx to be seen.
func TestWebhookResponseURL(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	s.SlashCommand("U0BOB", "C0GPU", "usage")
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	u := ev.Data.(slack.SlashCommand).ResponseURL
	ctx := ctxT(t)
	msg := &slack.WebhookMessage{Text: "usage: 120 GPU-hours", ResponseType: slack.ResponseTypeEphemeral}
	if err := slack.PostWebhookCustomHTTPContext(ctx, u, http.DefaultClient, msg); err != nil {
		t.Fatal(err)
	}
	if e := s.Ephemerals("U0BOB"); len(e) != 1 || e[0].Text != "usage: 120 GPU-hours" || e[0].Via != "response_url" {
		t.Errorf("ephemerals = %+v", e)
	}
	s.FailNext("response_url", "channel_not_found")
	if err := slack.PostWebhookCustomHTTPContext(ctx, u, http.DefaultClient, msg); err == nil {
		t.Error("FailNext(response_url) did not fail the post")
	}
	bad := &slack.WebhookMessage{Text: strings.Repeat("x", 40001)}
	if err := slack.PostWebhookCustomHTTPContext(ctx, u, http.DefaultClient, bad); err == nil {
		t.Error("a 40001-character text was accepted")
	}
	posts := s.ResponseURLPosts()
	if len(posts) != 3 || posts[1].Error != "channel_not_found" || posts[2].Error != "msg_too_long" {
		t.Errorf("posts = %+v", posts)
	}
}
