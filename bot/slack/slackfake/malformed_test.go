package slackfake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
)

// TestMalformedInput throws bad bodies at every method: each gets a Slack
// JSON answer, never a crash or a 5xx.
func TestMalformedInput(t *testing.T) {
	s := slackfake.Start(t)
	methods := []string{
		"auth.test", "chat.postMessage", "chat.update", "chat.delete", "chat.postEphemeral",
		"chat.getPermalink", "conversations.open", "users.info", "users.lookupByEmail",
		"views.open", "views.push", "views.update", "views.publish",
		"files.getUploadURLExternal", "files.completeUploadExternal",
	}
	jsonBodies := []string{
		``, `{`, `[]`, `null`, `"x"`, `{"channel":5,"text":{"a":1}}`,
		`{"channel":"C1","blocks":[1,"x",null,{"type":5},{"type":"section","text":7,"fields":"no"}]}`,
		`{"channel":"C1","blocks":[{"type":"actions","elements":[{"type":"button","text":{"type":"plain_text","text":["x"]}}]}]}`,
		`{"view":5,"trigger_id":3,"user_id":[]}`,
		`{"view":{"type":"modal","title":5,"blocks":{"a":1}},"trigger_id":"x","view_id":"V1","user_id":"U0ALICE"}`,
		`{"view":"{not json","user_id":"U0ALICE","files":"[{"}`,
		`{"files":[{"id":5}],"channel_id":"C1","length":"-1","filename":7}`,
	}
	formBodies := []string{
		`%zz`, `blocks=%5B1%5D&channel=C1&text=`, `blocks={"type":"section"}&channel=C1`,
		`view=[1,2]&trigger_id=x`, `files=[{"id":"F1"}]&channel_id=C1`, `users=,,,&return_im=maybe`,
	}
	do := func(method, contentType, body, auth string) {
		req, _ := http.NewRequest(http.MethodPost, s.APIURL()+method, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %q: %v", method, body, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil {
			t.Errorf("%s %q: HTTP %d %s", method, body, resp.StatusCode, b)
		}
	}
	for _, m := range methods {
		token := slackfake.BotToken
		for _, b := range jsonBodies {
			do(m, "application/json", b, token)
		}
		for _, b := range formBodies {
			do(m, "application/x-www-form-urlencoded", "token="+token+"&"+b, "")
		}
	}

	// Garbage on the socket is ignored; the connection keeps working.
	b := startBot(t, s)
	b.next(t, socketmode.EventTypeHello)
	ws, _, err := websocket.DefaultDialer.Dial(wsURL(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, junk := range []string{`{`, `[]`, `{"envelope_id":5}`, `{"envelope_id":"nope","payload":"x"}`} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(junk)); err != nil {
			t.Fatal(err)
		}
	}
	_ = ws.Close()
	if err := s.WaitFor(ctxT(t), func() bool { return s.Connections() == 1 }); err != nil {
		t.Fatal("the raw socket was not closed")
	}
	id := s.SlashCommand("U0ALICE", "C0GPU", "status")
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	if _, err := s.WaitAck(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
}

// wsURL opens a Socket Mode URL with apps.connections.open.
func wsURL(t *testing.T, s *slackfake.Server) string {
	t.Helper()
	api := slack.New(slackfake.BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(slackfake.AppToken))
	_, u, err := api.StartSocketModeContext(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestJSONEncodedPost: Slack also takes chat.postMessage as JSON with a
// Bearer token, blocks as an array.
func TestJSONEncodedPost(t *testing.T) {
	s := slackfake.Start(t)
	body := `{"channel":"C0GPU","text":"hi","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*hi*"}}]}`
	req, _ := http.NewRequest(http.MethodPost, s.APIURL()+"chat.postMessage", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+slackfake.BotToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m := s.Messages("C0GPU")
	if len(m) != 1 || m[0].Text != "hi" || !strings.Contains(string(m[0].Blocks), `"*hi*"`) {
		t.Errorf("messages = %+v", m)
	}
}

func TestEphemeralClickDeleteAndViewUpdate(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	ctx := ctxT(t)
	ts, err := b.api.PostEphemeralContext(ctx, "C0GPU", "U0ALICE", slack.MsgOptionText("choose", false), slack.MsgOptionBlocks(buttonBlocks()...))
	if err != nil {
		t.Fatal(err)
	}
	s.ClickButton("U0ALICE", "C0GPU", ts, "deny", "", "r1") // block_id looked up
	ev := b.next(t, socketmode.EventTypeInteractive)
	b.client.Ack(*ev.Request)
	cb := ev.Data.(slack.InteractionCallback)
	if a := cb.ActionCallback.BlockActions; len(a) != 1 || a[0].BlockID != "actions" || a[0].Text.Text != "Deny" {
		t.Errorf("actions = %+v", a)
	}
	if !cb.Container.IsEphemeral || cb.Message.Timestamp != "" {
		t.Errorf("container = %+v, message ts %q", cb.Container, cb.Message.Timestamp)
	}
	if _, _, err := b.api.PostMessageContext(ctx, "", slack.MsgOptionDeleteOriginal(cb.ResponseURL)); err != nil {
		t.Fatal(err)
	}
	if e := s.Ephemerals("U0ALICE"); len(e) != 1 || !e[0].Deleted {
		t.Errorf("ephemerals = %+v", e)
	}

	_, ts, err = b.api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("x", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.api.DeleteMessageContext(ctx, "C0GPU", ts); err != nil {
		t.Fatal(err)
	}
	if m := s.Messages("C0GPU"); !m[0].Deleted {
		t.Errorf("not deleted: %+v", m[0])
	}

	s.SlashCommand("U0ALICE", "C0GPU", "")
	ev = b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	modal := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "x", false, false),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewDividerBlock()}}}
	v, err := b.api.OpenViewContext(ctx, ev.Data.(slack.SlashCommand).TriggerID, modal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.api.UpdateViewContext(ctx, modal, "", "stale-hash", v.ID); err == nil || err.Error() != "hash_conflict" {
		t.Errorf("stale hash: %v", err)
	}
	if _, err := b.api.UpdateViewContext(ctx, modal, "", v.Hash, v.ID); err != nil {
		t.Errorf("update: %v", err)
	}
	id := s.SubmitView("U0ALICE", slackfake.ViewSubmission{})
	ev = b.next(t, socketmode.EventTypeInteractive)
	if !ev.Request.AcceptsResponsePayload {
		t.Error("view_submission must accept a response payload")
	}
	b.client.Ack(*ev.Request, slack.NewUpdateViewSubmissionResponse(&modal))
	if _, err := s.WaitAck(ctx, id); err != nil {
		t.Fatal(err)
	}
	views := s.Views()
	if last := views[len(views)-1]; last.Method != "response_action.update" || last.ID != v.ID || last.Error != "" {
		t.Errorf("last view = %+v", last)
	}
}
