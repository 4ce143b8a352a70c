package slackbot

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// stubService answers the adapter's direct questions.
type stubService struct{}

func (stubService) FormDefaults(string) commands.FormDefaults { return commands.FormDefaults{} }
func (stubService) Vocabulary() commands.Vocabulary           { return commands.Vocabulary{} }
func (stubService) Home(context.Context, string) commands.Reply {
	return commands.Reply{Text: "Home"}
}

// memThreads is a ThreadStore in memory.
type memThreads struct {
	mu sync.Mutex
	m  map[string]records.Thread
}

func (s *memThreads) PutThread(_ context.Context, id string, t records.Thread) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = t
	return nil
}

func (s *memThreads) GetThread(_ context.Context, id string) (records.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[id]
	if !ok {
		return records.Thread{}, fmt.Errorf("no thread of %s", id)
	}
	return t, nil
}

// replyInputs answers every command by sending outs through the adapter,
// as the runtime would.
type replyInputs struct {
	a    *Adapter
	outs func(ev bot.Event) []commands.Output
}

func (r replyInputs) Submit(ev bot.Event) error {
	for _, o := range r.outs(ev) {
		if o.To.Kind == commands.ToSender {
			o.To.User, o.To.Channel = ev.Input.User, ev.Input.Channel
		}
		if err := r.a.Send(context.Background(), o); err != nil {
			return err
		}
	}
	return nil
}

func longTable(rows int) commands.Reply {
	t := &commands.Table{Columns: []string{"Request", "Who", "GPUs", "Waits for"}}
	for i := range rows {
		t.Rows = append(t.Rows, []string{fmt.Sprintf("r%d", i), "alice", "8× h100", "capacity: 8 GPUs on one node"})
	}
	return commands.Reply{Text: "The queue.", Blocks: []commands.Block{{Kind: commands.BlockTable, Table: t}}}
}

// TestAdapterUploadsWhatDoesNotFit: a card and a private answer too long
// for Block Kit are cut, and their whole text is uploaded: the card's in
// its thread, the private one in a DM. API latency is observed per method,
// and Ready reports the connection.
func TestAdapterUploadsWhatDoesNotFit(t *testing.T) {
	fake := slackfake.Start(t)
	var mu sync.Mutex
	seen := map[string]int{}
	a := New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		stubService{}, &memThreads{m: map[string]records.Thread{}},
		WithObserver(func(method string, d time.Duration) { mu.Lock(); seen[method]++; mu.Unlock() }))
	in := replyInputs{a: a, outs: func(ev bot.Event) []commands.Output {
		return []commands.Output{
			{To: commands.Destination{Kind: commands.ToChannel, Channel: "C0GPU", Request: "r1"}, Reply: longTable(600)},
			{To: commands.Destination{Kind: commands.ToThread, Request: "r1"}, Reply: commands.Reply{Text: "Admitted."}},
			{To: commands.Destination{Kind: commands.ToSender}, Reply: longTable(700)},
			{To: commands.Destination{Kind: commands.ToPerson, Person: "nobody"}, Reply: commands.Reply{Text: "no chat ID: skipped"}},
		}
	}}
	if err := a.Ready(); err == nil {
		t.Error("ready before connecting")
	}
	wctx := runAdapter(t, a, in)
	env := fake.SlashCommand("U0ALICE", "C0RANDOM", "queue")
	if _, err := fake.WaitAck(wctx, env); err != nil {
		t.Fatal(err)
	}
	if err := a.Ready(); err != nil {
		t.Errorf("Ready after connecting: %v", err)
	}
	if err := fake.WaitFor(wctx, func() bool {
		n := 0
		for _, f := range fake.Files() {
			if f.Completed {
				n++
			}
		}
		return n == 2
	}); err != nil {
		t.Fatalf("waiting for two uploads: %v; files: %+v", err, fake.Files())
	}
	card := fake.Messages("C0GPU")[0]
	for _, f := range fake.Files() {
		switch f.Channel {
		case "C0GPU":
			if f.ThreadTS != card.TS || !strings.Contains(string(f.Content), "r599") {
				t.Errorf("card's file: thread %q (card %q), %d bytes", f.ThreadTS, card.TS, len(f.Content))
			}
		case fake.DMChannel("U0ALICE"):
			if !strings.Contains(string(f.Content), "r699") {
				t.Errorf("private file lacks the last row (%d bytes)", len(f.Content))
			}
		default:
			t.Errorf("file in %s", f.Channel)
		}
	}
	if err := fake.WaitFor(wctx, func() bool { return len(fake.Ephemerals("U0ALICE")) == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool {
		th := fake.Thread("C0GPU", card.TS)
		return len(th) == 3 && th[1].Via == "files.completeUploadExternal" && th[2].Text == "Admitted."
	}); err != nil {
		t.Errorf("thread of the card (want the file, then \"Admitted.\"): %d messages", len(fake.Thread("C0GPU", card.TS)))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range []string{"auth.test", "apps.connections.open", "chat.postMessage", "files.completeUploadExternal"} {
		if seen[m] == 0 {
			t.Errorf("no latency observed for %s (saw %v)", m, seen)
		}
	}
}

// TestAdapterThreadUpdateThatOvertakesItsCard: a thread update that
// reaches the adapter before its card (two workers racing) is posted
// after the card, in its thread; one for a request with no card (seeded
// work) is skipped.
func TestAdapterThreadUpdateThatOvertakesItsCard(t *testing.T) {
	fake := slackfake.Start(t)
	a := New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		stubService{}, &memThreads{m: map[string]records.Thread{}})
	ctx, cancel := context.WithCancel(context.Background())
	send := func(o commands.Output) {
		if err := a.Send(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	send(commands.Output{To: commands.Destination{Kind: commands.ToThread, Request: "r1"}, Reply: commands.Reply{Text: "Admitted."}})
	send(commands.Output{To: commands.Destination{Kind: commands.UpdateCard, Request: "r1"}, Reply: commands.Reply{Text: "r1 running"}})
	send(commands.Output{To: commands.Destination{Kind: commands.ToThread, Request: "r0"}, Reply: commands.Reply{Text: "seeded"}})
	send(commands.Output{To: commands.Destination{Kind: commands.ToChannel, Channel: "C0GPU", Request: "r1"}, Reply: commands.Reply{Text: "r1 queued"}})
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, replyInputs{a: a, outs: func(bot.Event) []commands.Output { return nil }}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := fake.WaitFor(wctx, func() bool {
		ms := fake.Messages("C0GPU")
		return len(ms) == 2 && ms[0].Edits == 1
	}); err != nil {
		t.Fatalf("%v: messages %+v", err, fake.Messages("C0GPU"))
	}
	ms := fake.Messages("C0GPU")
	if ms[0].Text != "r1 running" || ms[1].Text != "Admitted." || ms[1].ThreadTS != ms[0].TS {
		t.Errorf("card %q, then %q in thread %q of %q", ms[0].Text, ms[1].Text, ms[1].ThreadTS, ms[0].TS)
	}
	if err := a.q.Drain(wctx); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Calls("chat.postMessage")); n != 2 {
		t.Errorf("%d chat.postMessage calls, want 2 (the seeded request's update skipped)", n)
	}
}

// memDedupe is a bot.Deduper in memory.
type memDedupe struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (m *memDedupe) Seen(_ context.Context, key string, _ time.Time, _ time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.seen[key]
	m.seen[key] = true
	return was, nil
}

type echo struct{}

func (echo) Handle(_ context.Context, in commands.Input) []commands.Output {
	return []commands.Output{{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: "you said " + in.Text}}}
}

// TestAdapterSurvivesPingTimeouts: Slack stops pinging, so the client
// keeps replacing its connection; with Slack redelivering what was not
// acked, every command is answered exactly once.
func TestAdapterSurvivesPingTimeouts(t *testing.T) {
	fake := slackfake.Start(t, slackfake.WithPingInterval(time.Hour))
	a := New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		stubService{}, &memThreads{m: map[string]records.Thread{}}, WithPingTimeout(300*time.Millisecond))
	rt := bot.New(echo{}, a, bot.WithDeduper(&memDedupe{seen: map[string]bool{}}, time.Hour, clock.RealClock{}))
	ctx, cancel := context.WithCancel(context.Background())
	rt.Start(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, rt) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		rt.Wait()
	}()
	const n = 8
	for i := range n {
		// Spread the commands over several connections.
		cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := fake.WaitFor(cctx, func() bool { return fake.ConnectCount() >= 1+i/2 }); err != nil {
			t.Fatalf("waiting for connection %d: %v", 1+i/2, err)
		}
		ccancel()
		env := fake.SlashCommand("U0ALICE", "C0RANDOM", fmt.Sprint("status ", i))
		for attempt := 0; ; attempt++ {
			actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := fake.WaitAck(actx, env)
			acancel()
			if err == nil {
				break
			}
			if attempt == 10 {
				t.Fatalf("command %d never acked", i)
			}
			fake.Redeliver(env) // as Slack does when an ack does not come
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := fake.WaitFor(wctx, func() bool { return len(fake.Ephemerals("U0ALICE")) >= n }); err != nil {
		t.Fatalf("%v: %d answers", err, len(fake.Ephemerals("U0ALICE")))
	}
	if err := a.q.Drain(wctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range fake.Ephemerals("U0ALICE") {
		got = append(got, m.Text)
	}
	for i := range n {
		if c := strings.Count(strings.Join(got, "\n")+"\n", fmt.Sprintf("you said status %d\n", i)); c != 1 {
			t.Errorf("command %d answered %d times: %q", i, c, got)
		}
	}
	if fake.ConnectCount() < 2 {
		t.Errorf("%d connections: the ping timeout did not replace the connection", fake.ConnectCount())
	}
}

// TestAdapterKeepsOpenHomeTabsCurrent: a Home tab that was opened is
// published again after something was sent, once per round, and not when
// nothing changed; people who never opened it are left alone. The rounds
// are on the adapter's clock, a fake one stepped here: nothing else in
// the test waits on it, so a waiter on it is the refresh loop waiting for
// its next round.
func TestAdapterKeepsOpenHomeTabsCurrent(t *testing.T) {
	fake := slackfake.Start(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	const every = time.Minute
	a := New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		stubService{}, &memThreads{m: map[string]records.Thread{}}, WithHomeRefresh(every), WithClock(clk))
	in := replyInputs{a: a, outs: func(ev bot.Event) []commands.Output {
		return []commands.Output{{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: "ok"}}}
	}}
	wctx := runAdapter(t, a, in)
	published := func(user string) int {
		n := 0
		for _, v := range fake.Views() {
			if v.Method == "views.publish" && v.User == user {
				n++
			}
		}
		return n
	}
	// round steps the clock to the next round and returns once the loop
	// waits for the one after.
	round := func() {
		t.Helper()
		if err := fake.WaitFor(wctx, clk.HasWaiters); err != nil {
			t.Fatalf("the refresh loop never waited: %v", err)
		}
		clk.Step(every)
		if err := fake.WaitFor(wctx, clk.HasWaiters); err != nil {
			t.Fatalf("the refresh loop did not come round: %v", err)
		}
	}
	if _, err := fake.WaitAck(wctx, fake.AppHomeOpened("U0ALICE")); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool { return published("U0ALICE") == 1 }); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	round() // nothing was sent
	round()
	if n := published("U0ALICE"); n != 1 {
		t.Fatalf("published %d times with nothing sent, want 1", n)
	}
	if _, err := fake.WaitAck(wctx, fake.SlashCommand("U0BOB", "C0RANDOM", "status")); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool { return a.Pending() == 0 }); err != nil {
		t.Fatalf("the reply did not go out: %v", err)
	}
	round()
	if err := fake.WaitFor(wctx, func() bool { return published("U0ALICE") == 2 }); err != nil {
		t.Fatalf("refresh after a reply was sent: %v (published %d)", err, published("U0ALICE"))
	}
	round()
	if n := published("U0ALICE"); n != 2 {
		t.Errorf("published %d times after one change, want 2", n)
	}
	if n := published("U0BOB"); n != 0 {
		t.Errorf("published bob's Home %d times; he never opened it", n)
	}
}

// runAdapter runs a until the test ends (failing it if Run fails) and
// returns a context for the test's waits.
func runAdapter(t *testing.T, a *Adapter, in Inputs) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, in) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() {
		wcancel()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return wctx
}

// TestAdapterPostsWithImage: a post goes into its channel, and its chart
// is uploaded there with the files upload flow; when Slack refuses the
// upload, the chart's text is posted in the post's thread and the log
// says why. A private reply's chart goes to the person's DM.
func TestAdapterPostsWithImage(t *testing.T) {
	fake := slackfake.Start(t)
	var logs syncBuffer
	a := New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		stubService{}, &memThreads{m: map[string]records.Thread{}}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	png := []byte("\x89PNG\r\n\x1a\n not really")
	post := func(day string) commands.Output {
		return commands.Output{To: commands.Destination{Kind: commands.ToPost, Channel: "#gpu-admins"}, Reply: commands.Reply{
			Text:  "Daily digest for the cluster, " + day + ".",
			Image: &commands.Image{Name: "digest-" + day + ".png", Title: "GPU-hours " + day, PNG: png, Alt: "GPU-hours per day: nlp 12, 40"},
		}}
	}
	in := replyInputs{a: a, outs: func(ev bot.Event) []commands.Output {
		return []commands.Output{post("Mon"), {To: commands.Destination{Kind: commands.ToSender}, Reply: post("Tue").Reply}}
	}}
	wctx := runAdapter(t, a, in)
	if _, err := fake.WaitAck(wctx, fake.SlashCommand("U0ALICE", "C0RANDOM", "digest")); err != nil {
		t.Fatal(err)
	}
	admins := fake.ChannelID("#gpu-admins")
	if err := fake.WaitFor(wctx, func() bool {
		n := 0
		for _, f := range fake.Files() {
			if f.Completed {
				n++
			}
		}
		return n == 2
	}); err != nil {
		t.Fatalf("waiting for two uploads: %v; files: %+v", err, fake.Files())
	}
	for _, f := range fake.Files() {
		switch f.Channel {
		case admins:
			if f.Name != "digest-Mon.png" || f.Title != "GPU-hours Mon" || string(f.Content) != string(png) || f.ThreadTS != "" || f.AltText != "GPU-hours per day: nlp 12, 40" {
				t.Errorf("channel's upload = %+v", f)
			}
		case fake.DMChannel("U0ALICE"):
			if f.Name != "digest-Tue.png" {
				t.Errorf("DM upload = %s", f.Name)
			}
		default:
			t.Errorf("upload into %s", f.Channel)
		}
	}
	ms := fake.Messages(admins)
	if len(ms) != 2 || ms[0].Text != "Daily digest for the cluster, Mon." || ms[1].Via != "files.completeUploadExternal" {
		t.Fatalf("channel has %+v; want the post, then its chart", ms)
	}

	// Slack refuses the next upload: the post stands, and the chart's text
	// follows in its thread.
	fake.FailNext("files.getUploadURLExternal", "missing_scope")
	if err := a.Send(wctx, post("Wed")); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool { return len(fake.Messages(admins)) == 4 }); err != nil {
		t.Fatalf("%v: messages %+v", err, fake.Messages(admins))
	}
	ms = fake.Messages(admins)
	if ms[2].Text != "Daily digest for the cluster, Wed." || ms[3].ThreadTS != ms[2].TS || !strings.Contains(string(ms[3].Blocks), "nlp 12, 40") {
		t.Errorf("after a refused upload: %q, then %q in thread %q with %s", ms[2].Text, ms[3].Text, ms[3].ThreadTS, ms[3].Blocks)
	}
	if !strings.Contains(logs.String(), "Slack refused the upload of a chart") || !strings.Contains(logs.String(), "missing_scope") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
}

// TestReplayedMessagesAreNotPostedTwice: a kept output carries its outbox
// Seq as message metadata; sent again after a restart (Replayed), it is
// looked for first, and posted only if Slack does not have it. A card
// found so gets its thread remembered.
func TestReplayedMessagesAreNotPostedTwice(t *testing.T) {
	fake := slackfake.Start(t)
	threads := &memThreads{m: map[string]records.Thread{}}
	a := New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()}, stubService{}, threads)
	wctx := runAdapter(t, a, replyInputs{a: a, outs: func(bot.Event) []commands.Output { return nil }})
	post := commands.Output{To: commands.Destination{Kind: commands.ToPost, Channel: "#gpu"}, Reply: commands.Reply{Text: "digest"}, Seq: 7}
	if err := a.Send(wctx, post); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool { return a.Pending() == 0 && len(fake.Messages("#gpu")) == 1 }); err != nil {
		t.Fatal(err)
	}
	// A crash lost the confirmation: the restart sends both again, and a
	// card that never reached Slack.
	again := post
	again.Replayed = true
	card := commands.Output{To: commands.Destination{Kind: commands.ToChannel, Channel: "#gpu", Request: "r1"}, Reply: commands.Reply{Text: "r1 queued"}, Seq: 8, Replayed: true}
	for _, o := range []commands.Output{again, card} {
		if err := a.Send(wctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.WaitFor(wctx, func() bool { return a.Pending() == 0 }); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range fake.Messages("#gpu") {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, ","); got != "digest,r1 queued" {
		t.Errorf("messages in #gpu: %q; want the digest once and the card", got)
	}
	if th, err := threads.GetThread(wctx, "r1"); err != nil || th.TS == "" {
		t.Errorf("the card's thread was not remembered: %+v, %v", th, err)
	}
}
