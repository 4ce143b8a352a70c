package slackfake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
)

// bot is a slack-go Socket Mode client connected to the fake, with its
// events pumped promptly into a buffered channel.
type bot struct {
	api    *slack.Client
	client *socketmode.Client
	events chan socketmode.Event
	done   chan error
}

func newAPI(s *slackfake.Server) *slack.Client {
	return slack.New(slackfake.BotToken,
		slack.OptionAPIURL(s.APIURL()),
		slack.OptionAppLevelToken(slackfake.AppToken))
}

// startBot runs a socketmode client until the test ends.
func startBot(t *testing.T, s *slackfake.Server) *bot {
	t.Helper()
	b := &bot{api: newAPI(s), events: make(chan socketmode.Event, 1000), done: make(chan error, 1)}
	b.client = socketmode.New(b.api)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { b.done <- b.client.RunContext(ctx) }()
	go func() {
		for {
			select {
			case ev := <-b.client.Events:
				b.events <- ev
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.done:
		case <-time.After(5 * time.Second):
			t.Error("RunContext did not return after cancel")
		}
	})
	return b
}

// next returns the next event of type typ, skipping others.
func (b *bot) next(t *testing.T, typ socketmode.EventType) socketmode.Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev := <-b.events:
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 5 s", typ)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSlashCommandRoundTrip(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	hello := b.next(t, socketmode.EventTypeHello)
	if hello.Request == nil || hello.Request.NumConnections != 1 || hello.Request.ConnectionInfo.AppID != slackfake.AppID {
		t.Fatalf("hello = %+v", hello.Request)
	}

	id := s.SlashCommand("U0ALICE", "C0GPU", "request 4xh100 2h")
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	cmd, ok := ev.Data.(slack.SlashCommand)
	if !ok {
		t.Fatalf("Data is %T, want slack.SlashCommand", ev.Data)
	}
	if cmd.UserID != "U0ALICE" || cmd.UserName != "alice" || cmd.ChannelID != "C0GPU" || cmd.Command != "/gpu" ||
		cmd.Text != "request 4xh100 2h" || cmd.TeamID != slackfake.TeamID || cmd.APIAppID != slackfake.AppID ||
		cmd.ResponseURL == "" || cmd.TriggerID == "" {
		t.Errorf("slash command = %+v", cmd)
	}
	if ev.Request.EnvelopeID != id || !ev.Request.AcceptsResponsePayload {
		t.Errorf("request = %+v, want envelope %s accepting a response payload", ev.Request, id)
	}

	b.client.Ack(*ev.Request, map[string]any{"response_type": "ephemeral", "text": "queued"})
	ack, err := s.WaitAck(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ack.Payload), `"queued"`) || ack.Latency <= 0 {
		t.Errorf("ack = %+v", ack)
	}
	if err := s.WaitFor(ctxT(t), func() bool { return len(s.Ephemerals("U0ALICE")) == 1 }); err != nil {
		t.Fatal("ack payload did not become an ephemeral message")
	}
	if e := s.Ephemerals("U0ALICE")[0]; e.Text != "queued" || e.Via != "ack" || e.Channel != "C0GPU" {
		t.Errorf("ephemeral = %+v", e)
	}

	// The response_url takes an in_channel post and 5 uses in all.
	ctx := ctxT(t)
	for i := range 5 {
		_, _, err := b.api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeInChannel),
			slack.MsgOptionText(fmt.Sprintf("post %d", i), false))
		if err != nil {
			t.Fatalf("response_url post %d: %v", i, err)
		}
	}
	_, _, err = b.api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeInChannel),
		slack.MsgOptionText("sixth", false))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != http.StatusNotFound {
		t.Errorf("sixth response_url post: err = %#v, want HTTP 404", err)
	}
	if got := len(s.Messages("C0GPU")); got != 5 {
		t.Errorf("%d channel messages from response_url, want 5", got)
	}
	posts := s.ResponseURLPosts()
	if len(posts) != 6 || posts[0].Kind != "slash_commands" || posts[0].EnvelopeID != id || posts[5].Error != "used_url" {
		t.Errorf("response posts = %+v", posts)
	}
	if u := s.Unacked(); len(u) != 0 {
		t.Errorf("unacked: %+v", u)
	}
}

func buttonBlocks() []slack.Block {
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*r1* 4×h100 for 2h", false, false), nil, nil, slack.SectionBlockOptionBlockID("card")),
		slack.NewActionBlock("actions",
			slack.NewButtonBlockElement("approve", "r1", slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false)),
			slack.NewButtonBlockElement("deny", "r1", slack.NewTextBlockObject(slack.PlainTextType, "Deny", false, false))),
	}
}

func TestBlockActionsAndReplaceOriginal(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	ctx := ctxT(t)
	_, ts, err := b.api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("card", false), slack.MsgOptionBlocks(buttonBlocks()...))
	if err != nil {
		t.Fatal(err)
	}
	id := s.ClickButton("U0BOB", "C0GPU", ts, "approve", "actions", "r1")
	ev := b.next(t, socketmode.EventTypeInteractive)
	cb, ok := ev.Data.(slack.InteractionCallback)
	if !ok {
		t.Fatalf("Data is %T", ev.Data)
	}
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != "U0BOB" || cb.Channel.ID != "C0GPU" ||
		cb.Container.MessageTs != ts || cb.Container.ChannelID != "C0GPU" || cb.Message.Timestamp != ts ||
		cb.TriggerID == "" || cb.ResponseURL == "" {
		t.Errorf("callback = %+v", cb)
	}
	if n := len(cb.ActionCallback.BlockActions); n != 1 {
		t.Fatalf("%d block actions, want 1", n)
	}
	a := cb.ActionCallback.BlockActions[0]
	if a.ActionID != "approve" || a.BlockID != "actions" || a.Value != "r1" || a.Text.Text != "Approve" || a.Type != "button" {
		t.Errorf("action = %+v", a)
	}
	if len(cb.Message.Blocks.BlockSet) != 2 {
		t.Errorf("message blocks = %d, want 2", len(cb.Message.Blocks.BlockSet))
	}
	b.client.Ack(*ev.Request)
	if ack, err := s.WaitAck(ctx, id); err != nil || ack.Payload != nil {
		t.Fatalf("ack = %+v, %v", ack, err)
	}

	// replace_original through the response_url edits the card in place.
	_, _, err = b.api.PostMessageContext(ctx, "", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("approved by bob", false))
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.Messages("C0GPU")
	if len(msgs) != 1 || msgs[0].Text != "approved by bob" || msgs[0].Edits != 1 || len(msgs[0].History) != 1 || msgs[0].History[0].Text != "card" {
		t.Errorf("messages = %+v", msgs)
	}
}

func TestViewOpenAndSubmission(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	ctx := ctxT(t)
	s.SlashCommand("U0ALICE", "C0GPU", "")
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	cmd := ev.Data.(slack.SlashCommand)

	flavor := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, nil, "flavor",
		slack.NewOptionBlockObject("h100", slack.NewTextBlockObject(slack.PlainTextType, "H100 80GB", false, false), nil))
	modal := slack.ModalViewRequest{
		Type:       slack.VTModal,
		Title:      slack.NewTextBlockObject(slack.PlainTextType, "Request GPUs", false, false),
		Submit:     slack.NewTextBlockObject(slack.PlainTextType, "Request", false, false),
		CallbackID: "request",
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock("count", slack.NewTextBlockObject(slack.PlainTextType, "GPUs", false, false), nil,
				slack.NewPlainTextInputBlockElement(nil, "n")),
			slack.NewInputBlock("flavor", slack.NewTextBlockObject(slack.PlainTextType, "Flavor", false, false), nil, flavor),
		}},
	}
	resp, err := b.api.OpenViewContext(ctx, cmd.TriggerID, modal)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID == "" || resp.Hash == "" {
		t.Errorf("view = %+v", resp.View)
	}
	if _, err := b.api.OpenViewContext(ctx, "1.2.unknown", modal); err == nil || err.Error() != "invalid_trigger_id" {
		t.Errorf("unknown trigger: %v", err)
	}

	id := s.SubmitView("U0ALICE", slackfake.ViewSubmission{Values: map[string]map[string]slackfake.Input{
		"count":  {"n": slackfake.TextInput("4")},
		"flavor": {"flavor": slackfake.StaticSelect("h100")},
	}})
	ev = b.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeViewSubmission || cb.View.ID != resp.ID || cb.View.CallbackID != "request" || cb.User.ID != "U0ALICE" {
		t.Errorf("callback = %+v", cb)
	}
	if cb.View.State == nil {
		t.Fatal("no state")
	}
	if v := cb.View.State.Values["count"]["n"]; v.Value != "4" || v.Type != "plain_text_input" {
		t.Errorf("count = %+v", v)
	}
	if v := cb.View.State.Values["flavor"]["flavor"].SelectedOption; v.Value != "h100" || v.Text.Text != "H100 80GB" {
		t.Errorf("flavor = %+v", v)
	}
	b.client.Ack(*ev.Request, slack.NewErrorsViewSubmissionResponse(map[string]string{"count": "too many"}))
	ack, err := s.WaitAck(ctx, id)
	if err != nil || !strings.Contains(string(ack.Payload), `"response_action":"errors"`) {
		t.Errorf("ack = %s, %v", ack.Payload, err)
	}
	views := s.Views()
	if len(views) != 2 || views[0].Method != "views.open" || views[0].User != "U0ALICE" || views[0].Error != "" || views[1].Error != "invalid_trigger_id" {
		t.Errorf("views = %+v", views)
	}
}

func TestExpiredTrigger(t *testing.T) {
	s := slackfake.Start(t, slackfake.WithTriggerTTL(time.Nanosecond))
	b := startBot(t, s)
	s.SlashCommand("U0ALICE", "C0GPU", "")
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	modal := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "x", false, false),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewDividerBlock()}}}
	_, err := b.api.OpenViewContext(ctxT(t), ev.Data.(slack.SlashCommand).TriggerID, modal)
	if err == nil || err.Error() != "expired_trigger_id" {
		t.Errorf("err = %v, want expired_trigger_id", err)
	}
}

func TestAppHomeOpened(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	id := s.AppHomeOpened("U0CAROL")
	ev := b.next(t, socketmode.EventTypeEventsAPI)
	e, ok := ev.Data.(slackevents.EventsAPIEvent)
	if !ok || e.Type != slackevents.CallbackEvent {
		t.Fatalf("Data = %#v", ev.Data)
	}
	home, ok := e.InnerEvent.Data.(*slackevents.AppHomeOpenedEvent)
	if !ok || home.User != "U0CAROL" || home.Tab != "home" || !strings.HasPrefix(home.Channel, "D") {
		t.Fatalf("inner = %#v", e.InnerEvent.Data)
	}
	b.client.Ack(*ev.Request)
	if _, err := s.WaitAck(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: buttonBlocks()}}
	if _, err := b.api.PublishViewContext(ctxT(t), slack.PublishViewContextRequest{UserID: "U0CAROL", View: view}); err != nil {
		t.Fatal(err)
	}
	if v := s.Views(); len(v) != 1 || v[0].Method != "views.publish" || v[0].User != "U0CAROL" || v[0].ID == "" {
		t.Errorf("views = %+v", v)
	}
	if s.HomeView("U0CAROL") == nil {
		t.Error("no home view")
	}
}

func TestRedeliver(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	id := s.AppHomeOpened("U0ALICE")
	first := b.next(t, socketmode.EventTypeEventsAPI)
	s.Redeliver(id)
	again := b.next(t, socketmode.EventTypeEventsAPI)
	if again.Request.EnvelopeID != id || again.Request.RetryAttempt != 1 || again.Request.RetryReason != "timeout" || first.Request.RetryAttempt != 0 {
		t.Errorf("first %+v, again %+v", first.Request, again.Request)
	}
	b.client.Ack(*again.Request)
	if _, err := s.WaitAck(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
	if env := s.Envelopes(); len(env) != 1 || env[0].Attempts != 2 || !env[0].Acked {
		t.Errorf("envelopes = %+v", env)
	}

	newID := s.RedeliverAsNew(id)
	third := b.next(t, socketmode.EventTypeEventsAPI)
	if newID == id || third.Request.EnvelopeID != newID || third.Request.RetryAttempt != 2 ||
		string(third.Request.Payload) != string(first.Request.Payload) {
		t.Errorf("as new: %+v", third.Request)
	}
	b.client.Ack(*third.Request)
}

func TestDisconnectRefreshRequested(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	b.next(t, socketmode.EventTypeHello)
	s.Disconnect("refresh_requested")
	b.next(t, socketmode.EventTypeHello) // the new socket's hello
	ctx := ctxT(t)
	if err := s.WaitFor(ctx, func() bool { return s.ConnectCount() == 2 && s.Connections() == 1 }); err != nil {
		t.Fatalf("connect count %d, live %d", s.ConnectCount(), s.Connections())
	}
	id := s.SlashCommand("U0ALICE", "C0GPU", "status")
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	if _, err := s.WaitAck(ctx, id); err != nil {
		t.Fatal(err)
	}
	if env := s.Envelopes(); env[0].Conn != 2 {
		t.Errorf("envelope went to socket %d, want 2", env[0].Conn)
	}
	if n := len(s.Calls("apps.connections.open")); n != 2 {
		t.Errorf("%d apps.connections.open calls, want 2", n)
	}
}

func TestDropConnections(t *testing.T) {
	s := slackfake.Start(t)
	b := startBot(t, s)
	b.next(t, socketmode.EventTypeHello)
	s.DropConnections()
	id := s.SlashCommand("U0ALICE", "C0GPU", "status") // waits for the reconnect
	ev := b.next(t, socketmode.EventTypeSlashCommand)
	b.client.Ack(*ev.Request)
	if _, err := s.WaitAck(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
	if s.ConnectCount() != 2 {
		t.Errorf("connect count %d, want 2", s.ConnectCount())
	}
}

func TestSeveralConnectionsGetEachEnvelopeOnce(t *testing.T) {
	s := slackfake.Start(t)
	b1, b2 := startBot(t, s), startBot(t, s)
	b1.next(t, socketmode.EventTypeHello)
	b2.next(t, socketmode.EventTypeHello)
	var ids []string
	for range 4 {
		ids = append(ids, s.SlashCommand("U0ALICE", "C0GPU", "status"))
	}
	got := map[string]int{}
	var mu sync.Mutex
	drain := func(b *bot) {
		for {
			select {
			case ev := <-b.events:
				if ev.Type == socketmode.EventTypeSlashCommand {
					b.client.Ack(*ev.Request)
					mu.Lock()
					got[ev.Request.EnvelopeID]++
					mu.Unlock()
				}
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { drain(b1) })
	wg.Go(func() { drain(b2) })
	wg.Wait()
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("envelope %s delivered %d times", id, got[id])
		}
	}
	conns := map[int]bool{}
	for _, e := range s.Envelopes() {
		conns[e.Conn] = true
	}
	if len(conns) != 2 {
		t.Errorf("envelopes went to sockets %v, want both", conns)
	}
}

func TestInvalidAppToken(t *testing.T) {
	s := slackfake.Start(t)
	api := slack.New(slackfake.BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken("xapp-wrong"))
	client := socketmode.New(api)
	go func() {
		for range client.Events {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- client.RunContext(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "invalid_auth" {
			t.Errorf("RunContext = %v, want invalid_auth", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("RunContext did not return")
	}
}

func TestUnacked(t *testing.T) {
	s := slackfake.Start(t, slackfake.WithAckDeadline(20*time.Millisecond))
	b := startBot(t, s)
	id := s.SlashCommand("U0ALICE", "C0GPU", "status")
	b.next(t, socketmode.EventTypeSlashCommand) // and never ack
	if err := s.WaitFor(ctxT(t), func() bool { return len(s.Unacked()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if u := s.Unacked(); u[0].ID != id || u[0].Acked {
		t.Errorf("unacked = %+v", u)
	}
}

// TestChannelNames: chat.postMessage and chat.postEphemeral take a
// channel's name, with or without "#", and Slack answers with the
// channel's ID, under which the messages are kept; the methods that act
// on a posted message want that ID.
func TestChannelNames(t *testing.T) {
	s := slackfake.Start(t)
	api := newAPI(s)
	ctx := ctxT(t)
	id := s.ChannelID("#gpu-nlp")
	if !regexp.MustCompile(`^C[A-Z0-9]{8,}$`).MatchString(id) {
		t.Fatalf("ChannelID(#gpu-nlp) = %q, want a channel ID", id)
	}
	if other := slackfake.New(); other.ChannelID("gpu-nlp") != id {
		t.Errorf("another fake gives gpu-nlp the ID %s, not %s", other.ChannelID("gpu-nlp"), id)
	} else {
		other.Close()
	}
	if s.ChannelID("gpu-nlp") != id || s.ChannelID(id) != id || s.ChannelID("#gpu-vision") == id {
		t.Errorf("IDs: gpu-nlp %s, %s → %s, #gpu-vision %s", s.ChannelID("gpu-nlp"), id, s.ChannelID(id), s.ChannelID("#gpu-vision"))
	}

	ch, card, err := api.PostMessageContext(ctx, "#gpu-nlp", slack.MsgOptionText("card", false))
	if err != nil || ch != id {
		t.Fatalf("post to #gpu-nlp answered channel %q, %v; want %s", ch, err, id)
	}
	ch2, _, err := api.PostMessageContext(ctx, "gpu-nlp", slack.MsgOptionText("reply", false), slack.MsgOptionTS(card))
	if err != nil || ch2 != id {
		t.Fatalf("reply to gpu-nlp answered channel %q, %v; want %s", ch2, err, id)
	}
	for _, name := range []string{"#gpu-nlp", "gpu-nlp", id} {
		ms := s.Messages(name)
		if len(ms) != 2 || ms[0].Channel != id || ms[1].Channel != id {
			t.Errorf("Messages(%s) = %+v", name, ms)
		}
		if th := s.Thread(name, card); len(th) != 2 || th[1].Text != "reply" {
			t.Errorf("Thread(%s) = %+v", name, th)
		}
	}
	if _, err := api.PostEphemeralContext(ctx, "#gpu-nlp", "U0BOB", slack.MsgOptionText("only you", false)); err != nil {
		t.Fatal(err)
	}
	if e := s.Ephemerals("U0BOB"); len(e) != 1 || e[0].Channel != id {
		t.Errorf("ephemerals = %+v", e)
	}

	// Acting on the card: by ID, as Slack answered it; a name is refused.
	if _, _, _, err := api.UpdateMessageContext(ctx, "#gpu-nlp", card, slack.MsgOptionText("card v2", false)); err == nil || err.Error() != "channel_not_found" {
		t.Errorf("chat.update by name: %v, want channel_not_found", err)
	}
	if _, err := api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "gpu-nlp", Ts: card}); err == nil || err.Error() != "channel_not_found" {
		t.Errorf("chat.getPermalink by name: %v, want channel_not_found", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, ch, card, slack.MsgOptionText("card v2", false)); err != nil {
		t.Errorf("chat.update by the ID: %v", err)
	}
	if m := s.Messages("#gpu-nlp")[0]; m.Text != "card v2" || m.Edits != 1 {
		t.Errorf("card after the update: %+v", m)
	}
	for _, bad := range []string{"#GPU NLP", "#", "gpu nlp"} {
		if _, _, err := api.PostMessageContext(ctx, bad, slack.MsgOptionText("x", false)); err == nil || err.Error() != "channel_not_found" {
			t.Errorf("post to %q: %v, want channel_not_found", bad, err)
		}
	}

	// A command typed in a channel given by name arrives with its ID and name.
	b := startBot(t, s)
	s.SlashCommand("U0ALICE", "#random", "status")
	cmd, ok := b.next(t, socketmode.EventTypeSlashCommand).Data.(slack.SlashCommand)
	if !ok || cmd.ChannelID != s.ChannelID("random") || cmd.ChannelName != "random" {
		t.Errorf("slash command in #random: %+v", cmd)
	}
}
