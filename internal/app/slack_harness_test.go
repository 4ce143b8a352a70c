package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/deploy"
	"github.com/gpubot/gpubot/internal/app"
)

// The example configuration's channels, by name as the example writes
// them: gpubot posts to the name and Slack (the fake too) answers with the
// channel's ID, which the cards' threads and updates must use.
const (
	chNLP    = "#gpu-nlp"
	chVision = "#gpu-vision"
	chGPU    = "#gpu"
	chRandom = "#random" // where people type commands
)

// Users of the example configuration, in the fake workspace.
var exampleUsers = []slackfake.User{
	{ID: "U0ALICE", Name: "alice", Email: "alice@example.com"},
	{ID: "U0BOB", Name: "bob", Email: "bob@example.com"},
	{ID: "U0CAROL", Name: "carol", Email: "carol@example.com"},
	{ID: "U0DAVE", Name: "dave", Email: "dave@example.com"},
	{ID: "U0ERIN", Name: "erin", Email: "erin@example.com"},
	{ID: "U0FRANK", Name: "frank", Email: "frank@example.com"},
	{ID: "U0GRACE", Name: "grace", Email: "grace@example.com"},
	{ID: "U0MALLORY", Name: "mallory", Email: "mallory@example.com"},
}

// exampleConfig writes the bundled example with extra YAML appended, and
// returns its path.
func exampleConfig(t testing.TB, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpubot.yaml")
	if err := os.WriteFile(path, []byte(string(deploy.ExampleConfig)+"\n"+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fastPosting lifts the per-channel pacing so that tests do not wait.
const fastPosting = "slack:\n  messagesPerSecond: 100\n  burst: 100\n"

// slackBot is gpubot running on the fake Slack through app.Run.
type slackBot struct {
	t      testing.TB
	fake   *slackfake.Server
	clock  *clocktesting.FakeClock
	dir    string
	config string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startFake(t testing.TB, opts ...slackfake.Option) *slackfake.Server {
	return slackfake.Start(t, append([]slackfake.Option{slackfake.WithUsers(exampleUsers...)}, opts...)...)
}

// startSlackBot runs gpubot on fake with a fresh clock at start.
func startSlackBot(t testing.TB, fake *slackfake.Server, dir, config string, clk *clocktesting.FakeClock) *slackBot {
	t.Helper()
	return startSlackBotAt(t, fake, dir, config, clk, "")
}

// startSlackBotAt is startSlackBot serving health and metrics on addr.
func startSlackBotAt(t testing.TB, fake *slackfake.Server, dir, config string, clk *clocktesting.FakeClock, addr string) *slackBot {
	t.Helper()
	if clk == nil {
		clk = clocktesting.NewFakeClock(start)
	}
	return runSlackBot(t, fake, dir, config, clk, app.ClusterOptions{HTTPAddr: addr})
}

// runSlackBot runs gpubot on fake through app.Run until the test ends: on
// the simulated cluster, following clk, or, when cluster names one, on a
// real cluster, where time is real and clk is nil.
func runSlackBot(t testing.TB, fake *slackfake.Server, dir, config string, clk *clocktesting.FakeClock, cluster app.ClusterOptions) *slackBot {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &slackBot{t: t, fake: fake, clock: clk, dir: dir, config: config, cancel: cancel, done: make(chan error, 1)}
	o := app.Options{
		ConfigPath: config,
		DataDir:    dir,
		LogFile:    filepath.Join(dir, "test.log"),
		LogLevel:   slog.LevelDebug,
		Slack:      app.SlackOptions{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		Cluster:    cluster,
	}
	if clk != nil {
		o.Clock = clk
	}
	go func() { b.done <- app.Run(ctx, o) }()
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Errorf("app.Run: %v", err)
		}
	})
	return b
}

// freeAddr returns a local address nothing listens on, for --http-addr.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// httpGet fetches path from the health and metrics server at addr; the
// status is 0 (and the body the error) when nothing answers.
func httpGet(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// stop stops the bot and returns what Run returned.
func (b *slackBot) stop() error {
	b.once.Do(func() {
		b.cancel()
		select {
		case b.err = <-b.done:
		case <-time.After(30 * time.Second):
			b.err = errors.New("app.Run did not return within 30 s of cancel")
		}
	})
	return b.err
}

func waitCtx(t testing.TB) context.Context {
	// A bound on waiting, not a timing: generous, since a real cluster's
	// pods on a loaded 2-core machine can take a while.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor waits for cond over the fake's state; what says what for the
// failure message.
func (b *slackBot) waitFor(what string, cond func() bool) {
	b.t.Helper()
	if err := b.fake.WaitFor(waitCtx(b.t), cond); err != nil {
		b.t.Fatalf("waiting for %s: %v\nlog:\n%s", what, err, b.log())
	}
}

func (b *slackBot) log() string {
	data, _ := os.ReadFile(filepath.Join(b.dir, "test.log"))
	return string(data)
}

// command types a /gpu command and checks its ack.
func (b *slackBot) command(user, channel, text string) string {
	b.t.Helper()
	env := b.fake.SlashCommand(user, channel, text)
	if _, err := b.fake.WaitAck(waitCtx(b.t), env); err != nil {
		b.t.Fatalf("ack of %q: %v", text, err)
	}
	return env
}

// topLevel returns the channel's messages that are not thread replies.
func topLevel(ms []slackfake.Message) []slackfake.Message {
	var out []slackfake.Message
	for _, m := range ms {
		if m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}

// card waits for the card whose text starts with the request ID.
func (b *slackBot) card(channel, id string) slackfake.Message {
	b.t.Helper()
	var found slackfake.Message
	b.waitFor("card "+id+" in "+channel, func() bool {
		for _, m := range topLevel(b.fake.Messages(channel)) {
			if strings.HasPrefix(m.Text, id+" ") {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// texts is what a thread says after its card, in order.
func texts(ms []slackfake.Message) []string {
	var out []string
	for i, m := range ms {
		if i == 0 && m.ThreadTS == "" {
			continue
		}
		out = append(out, m.Text)
	}
	return out
}

// button finds a button on a message by its verb and request.
type button struct{ actionID, blockID, value string }

func findButton(t testing.TB, m slackfake.Message, verb string) button {
	t.Helper()
	var blocks []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		t.Fatalf("blocks of %q: %v", m.Text, err)
	}
	for _, bl := range blocks {
		for _, e := range bl.Elements {
			if e.Type == "button" && strings.HasPrefix(e.ActionID, "gpubot:"+verb) {
				return button{e.ActionID, bl.BlockID, e.Value}
			}
		}
	}
	t.Fatalf("no %s button on %q:\n%s", verb, m.Text, m.Blocks)
	return button{}
}

// click presses a button on a message and checks the ack.
func (b *slackBot) click(user string, m slackfake.Message, verb string) string {
	b.t.Helper()
	bt := findButton(b.t, m, verb)
	env := b.fake.ClickButton(user, m.Channel, m.TS, bt.actionID, bt.blockID, bt.value)
	if _, err := b.fake.WaitAck(waitCtx(b.t), env); err != nil {
		b.t.Fatalf("ack of %s click: %v", verb, err)
	}
	return env
}

// ephemeral waits for an ephemeral message to user containing s.
func (b *slackBot) ephemeral(user, s string) slackfake.Message {
	b.t.Helper()
	var found slackfake.Message
	b.waitFor("ephemeral to "+user+" with "+s, func() bool {
		for _, m := range b.fake.Ephemerals(user) {
			if strings.Contains(m.Text, s) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// threadHas waits until the thread of card has a reply containing each of
// phrases, in order.
func (b *slackBot) threadHas(card slackfake.Message, phrases ...string) []string {
	b.t.Helper()
	var got []string
	if err := b.fake.WaitFor(waitCtx(b.t), func() bool {
		got = texts(b.fake.Thread(card.Channel, card.TS))
		return inOrder(got, phrases)
	}); err != nil {
		b.t.Fatalf("waiting for the thread of %s to say %s: %v\nthe thread: %q\nlog:\n%s", card.Text, strings.Join(phrases, " … "), err, got, b.log())
	}
	return got
}

func inOrder(got, phrases []string) bool {
	i := 0
	for _, g := range got {
		if i < len(phrases) && strings.Contains(g, phrases[i]) {
			i++
		}
	}
	return i == len(phrases)
}

// noUnacked fails if an envelope waited for its ack longer than Slack's
// 3 s, or if Slack refused a call for its channel (a channel's name where
// Slack wants the ID it answered when the card was posted).
func noUnacked(t testing.TB, fake *slackfake.Server) {
	t.Helper()
	if u := fake.Unacked(); len(u) > 0 {
		t.Errorf("%d envelopes not acked within 3 s: %+v", len(u), u)
	}
	for _, a := range fake.Acks() {
		if a.Latency > 3*time.Second {
			t.Errorf("envelope %s acked after %s", a.EnvelopeID, a.Latency)
		}
	}
	for _, c := range fake.Calls("") {
		if c.Error == "channel_not_found" {
			t.Errorf("%s refused: channel_not_found (channel %q)", c.Method, c.Params.Get("channel"))
		}
	}
}
