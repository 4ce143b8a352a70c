package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/internal/app"
)

// endOf reads "ends HH:MM" (Europe/Berlin, the example's zone) from a
// thread message and returns that time on the day of now.
func endOf(t testing.TB, msg string, now time.Time) time.Time {
	t.Helper()
	i := strings.Index(msg, "ends ")
	if i < 0 {
		t.Fatalf("no end time in %q", msg)
	}
	hm, err := time.Parse("15:04", msg[i+5:i+10])
	if err != nil {
		t.Fatalf("end time in %q: %v", msg, err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	n := now.In(berlin)
	end := time.Date(n.Year(), n.Month(), n.Day(), hm.Hour(), hm.Minute(), 0, 0, berlin)
	if end.Before(now) {
		end = end.AddDate(0, 0, 1)
	}
	return end
}

// TestSlackRequestLife follows a request through its card and thread:
// posted, refused to an unauthorised approver privately, approved by the
// lead, admitted as time passes, warned before its end, finished.
func TestSlackRequestLife(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)

	// dave's request starts at once (reclaiming nlp's borrowed dev box, a
	// seeded request with no card: nothing is posted for it).
	b.command("U0DAVE", chRandom, `request 8xh100 for 4h reason "detector ablation"`)
	r10 := b.card(chVision, "r10")
	if !strings.Contains(r10.Text, "running") {
		t.Errorf("r10 card: %q", r10.Text)
	}
	b.ephemeral("U0DAVE", "Updates follow in its thread")

	// alice's borrows from the cohort, so it needs bob's approval.
	b.command("U0ALICE", chRandom, `request 8xh100 for 4h reason "eval run"`)
	r11 := b.card(chNLP, "r11")
	if !strings.Contains(r11.Text, "needs approval") {
		t.Fatalf("r11 card: %q", r11.Text)
	}
	b.ephemeral("U0ALICE", "r11 needs approval")

	// alice may not approve her own request: told privately, nothing changes.
	b.click("U0ALICE", r11, "approve")
	b.ephemeral("U0ALICE", "Only bob")
	if got := texts(fake.Thread(chNLP, r11.TS)); len(got) != 0 {
		t.Errorf("thread after a refused click: %q", got)
	}

	// bob approves: the thread says so, the card is updated, alice is told.
	b.click("U0BOB", r11, "approve")
	b.threadHas(r11, "Approved by bob.")
	b.ephemeral("U0BOB", "Approved r11.")
	b.waitFor("r11's card updated", func() bool {
		m := b.card(chNLP, "r11")
		return m.Edits > 0 && strings.Contains(m.Text, "queued")
	})
	b.waitFor("a DM to alice", func() bool {
		for _, m := range fake.DMs("U0ALICE") {
			if strings.Contains(m.Text, "bob approved your request r11") {
				return true
			}
		}
		return false
	})

	// Time passes: admitted, then warned before its end, then finished.
	b.clock.Step(3 * time.Hour)
	got := b.threadHas(r11, "Approved by bob.", "Admitted after")
	var admitted string
	for _, g := range got {
		if strings.Contains(g, "Admitted after") {
			admitted = g
		}
	}
	end := endOf(t, admitted, b.clock.Now())
	t.Logf("admitted: %q; now %s; end %s", admitted, b.clock.Now(), end)
	b.clock.SetTime(end.Add(-10 * time.Minute))
	b.threadHas(r11, "Approved by bob.", "Admitted after", "r11 ends in")
	b.clock.SetTime(end)
	got = b.threadHas(r11, "Approved by bob.", "Admitted after", "r11 ends in", "Finished: ran 4h")
	b.waitFor("the card to show the end", func() bool { return strings.Contains(b.card(chNLP, "r11").Text, "finished") })
	if calls := fake.Calls("chat.update"); len(calls) == 0 {
		t.Error("no chat.update calls")
	}
	t.Logf("thread of r11: %q", got)
	noUnacked(t, fake)
}

// TestSlackPreemptionTellsTheVictim: an admin's approval makes room by
// preempting lower-priority work; the victim's thread and owner are told,
// and a non-admin asking to preempt is refused privately.
func TestSlackPreemptionTellsTheVictim(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)
	b.command("U0ALICE", chRandom, "request 16xa100 for 6h priority low")
	b.card(chNLP, "r10")
	b.command("U0GRACE", chRandom, "request 8xa100 for 6h priority low")
	r11 := b.card(chGPU, "r11")
	b.command("U0GRACE", chRandom, "request 16xa100 for 2h")
	r12 := b.card(chGPU, "r12")
	b.command("U0DAVE", chRandom, "preempt r12")
	b.ephemeral("U0DAVE", "Only admins")
	b.command("U0CAROL", chRandom, "approve r12")
	b.threadHas(r12, "Approved by carol.", "Started at once by preempting r11")
	b.threadHas(r11, "Preempted by r12")
	b.waitFor("grace told in a DM", func() bool {
		for _, m := range fake.DMs("U0GRACE") {
			if strings.Contains(m.Text, "Your request r11 was preempted") {
				return true
			}
		}
		return false
	})
	noUnacked(t, fake)
}

// TestSlackRequestModal: a bare /gpu request opens the modal; a bad
// submission is answered in the ack with per-field errors, a good one
// becomes the request.
func TestSlackRequestModal(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)
	bare := b.command("U0GRACE", chRandom, "request")
	opened := func() int {
		n := 0
		for _, v := range fake.Views() {
			if v.Method == "views.open" && v.Error == "" {
				n++
			}
		}
		return n
	}
	b.waitFor("views.open", func() bool { return opened() == 1 })
	fake.Redeliver(bare) // a redelivered command opens no second form
	values := func(count, duration string) map[string]map[string]slackfake.Input {
		return map[string]map[string]slackfake.Input{
			"count":    {"count": slackfake.TextInput(count)},
			"flavor":   {"flavor": slackfake.StaticSelect("a100")},
			"duration": {"duration": slackfake.TextInput(duration)},
			"team":     {"team": slackfake.StaticSelect("speech")},
			"priority": {"priority": slackfake.StaticSelect("normal")},
		}
	}
	env := fake.SubmitView("U0GRACE", slackfake.ViewSubmission{Values: values("4", "forever")})
	ack, err := fake.WaitAck(waitCtx(t), env)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Action string            `json:"response_action"`
		Errors map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(ack.Payload, &resp); err != nil || resp.Action != "errors" || resp.Errors["duration"] == "" {
		t.Fatalf("ack of a bad submission: %s (%v)", ack.Payload, err)
	}
	env = fake.SubmitView("U0GRACE", slackfake.ViewSubmission{Values: values("4", "2h")})
	ack, err = fake.WaitAck(waitCtx(t), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(ack.Payload) > 0 && string(ack.Payload) != "null" {
		t.Errorf("ack of a good submission: %s", ack.Payload)
	}
	c := b.card(chGPU, "r10")
	if !strings.Contains(c.Text, "running") {
		t.Errorf("card from the modal: %q", c.Text)
	}
	if n := len(fake.Calls("views.open")); n != 1 {
		t.Errorf("views.open called %d times, want 1", n)
	}
	noUnacked(t, fake)
}

// TestSlackAppHome publishes App Home when it is opened, once per event.
func TestSlackAppHome(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)
	env := fake.AppHomeOpened("U0ALICE")
	if _, err := fake.WaitAck(waitCtx(t), env); err != nil {
		t.Fatal(err)
	}
	published := func() int {
		n := 0
		for _, v := range fake.Views() {
			if v.Method == "views.publish" && v.User == "U0ALICE" {
				if v.Error != "" {
					t.Errorf("views.publish: %s", v.Error)
				}
				n++
			}
		}
		return n
	}
	b.waitFor("views.publish", func() bool { return published() == 1 })
	fake.Redeliver(env)
	b.command("U0ALICE", chRandom, "status") // a later command: the redelivery was handled before it
	b.ephemeral("U0ALICE", "")
	b.waitFor("the queue to empty", func() bool { return len(fake.Calls("views.publish")) >= 1 })
	if n := published(); n != 1 {
		t.Errorf("published %d times for one event", n)
	}
	noUnacked(t, fake)
}

// TestSlackDuplicatesAreHandledOnce: a redelivered envelope and a double
// click change nothing twice.
func TestSlackDuplicatesAreHandledOnce(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)
	env := b.command("U0ALICE", chRandom, `request 8xh100 for 4h reason "eval run"`)
	r10 := b.card(chNLP, "r10")
	fake.Redeliver(env)
	if _, err := fake.WaitAck(waitCtx(t), env); err != nil {
		t.Fatal(err)
	}
	// A click is redelivered, and bob double-clicks.
	click := b.click("U0BOB", r10, "approve")
	fake.Redeliver(click)
	b.click("U0BOB", r10, "approve")
	b.threadHas(r10, "Approved by bob.")
	b.ephemeral("U0BOB", "Approved r10.")
	b.ephemeral("U0BOB", "Nothing was changed")
	b.command("U0ALICE", chRandom, "status")
	b.ephemeral("U0ALICE", "r10")
	// Exactly one card, one approval, one refusal of the second click.
	if n := len(topLevel(fake.Messages(chNLP))); n != 1 {
		t.Errorf("%d cards in %s, want 1", n, chNLP)
	}
	if n := countContaining(texts(fake.Thread(chNLP, r10.TS)), "Approved by bob."); n != 1 {
		t.Errorf("approved %d times", n)
	}
	var bob []string
	for _, m := range fake.Ephemerals("U0BOB") {
		bob = append(bob, m.Text)
	}
	if countContaining(bob, "Approved r10.") != 1 || countContaining(bob, "Nothing was changed") != 1 {
		t.Errorf("bob was told: %q", bob)
	}
	noUnacked(t, fake)
}

func countContaining(list []string, s string) int {
	n := 0
	for _, x := range list {
		if strings.Contains(x, s) {
			n++
		}
	}
	return n
}

// TestSlackReconnectLosesNothing: Slack asks for a reconnect
// (refresh_requested) and later the network drops, between commands;
// every command is answered exactly once.
func TestSlackReconnectLosesNothing(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)
	users := []string{"U0ALICE", "U0BOB", "U0CAROL", "U0DAVE"}
	for i, u := range users {
		b.command(u, chRandom, "capacity")
		switch i {
		case 1:
			fake.Disconnect("refresh_requested")
		case 2:
			fake.DropConnections()
		}
	}
	for _, u := range users {
		b.waitFor("the answer to "+u, func() bool { return len(fake.Ephemerals(u)) >= 1 })
	}
	b.command("U0ERIN", chRandom, "capacity") // after both reconnects
	b.waitFor("the answer to erin", func() bool { return len(fake.Ephemerals("U0ERIN")) >= 1 })
	for _, u := range append(users, "U0ERIN") {
		if n := len(fake.Ephemerals(u)); n != 1 {
			t.Errorf("%s got %d answers, want 1", u, n)
		}
	}
	if fake.ConnectCount() < 3 {
		t.Errorf("%d connections, want at least 3 (two reconnects)", fake.ConnectCount())
	}
	noUnacked(t, fake)
}

// TestSlackRestartKeepsThreads: a new process on the same data directory
// answers in the threads of cards the old one posted.
func TestSlackRestartKeepsThreads(t *testing.T) {
	fake := startFake(t)
	dir, cfg := t.TempDir(), exampleConfig(t, fastPosting)
	clk := clocktesting.NewFakeClock(start)
	b := startSlackBot(t, fake, dir, cfg, clk)
	b.command("U0ALICE", chRandom, `request 8xh100 for 4h reason "eval run"`)
	r10 := b.card(chNLP, "r10")
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	b2 := startSlackBot(t, fake, dir, cfg, clk)
	b2.click("U0BOB", r10, "approve")
	b2.threadHas(r10, "Approved by bob.")
	b2.waitFor("the card updated", func() bool { return b2.card(chNLP, "r10").Edits > 0 })
	if n := len(topLevel(fake.Messages(chNLP))); n != 1 {
		t.Errorf("%d cards after the restart, want 1", n)
	}
	noUnacked(t, fake)
}

// TestSlackRateLimitStorm: chat.postMessage and the response URLs answer
// 429 for a while; every command is still answered exactly once, in order.
func TestSlackRateLimitStorm(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, ""), nil) // default pacing: 1/s per channel
	fake.RateLimit("chat.postMessage", 3, time.Second)
	fake.RateLimit("response_url", 3, time.Second)
	fake.RateLimit("chat.postEphemeral", 3, time.Second)
	b.command("U0ALICE", chRandom, "request 1xh100 for 1h priority low")
	b.command("U0ALICE", chRandom, "request 1xh100 for 1h priority low")
	b.command("U0ALICE", chRandom, "request 1xh100 for 1h priority low")
	for i := range 4 {
		b.command("U0BOB", chRandom, "status r1"+string(rune('0'+i)))
	}
	b.waitFor("three cards", func() bool { return len(topLevel(fake.Messages(chNLP))) == 3 })
	b.waitFor("bob's answers", func() bool { return len(fake.Ephemerals("U0BOB")) == 4 })
	b.waitFor("alice's answers", func() bool { return len(fake.Ephemerals("U0ALICE")) == 3 })
	for i, m := range topLevel(fake.Messages(chNLP)) {
		if want := "r1" + string(rune('0'+i)) + " "; !strings.HasPrefix(m.Text, want) {
			t.Errorf("card %d is %q, want %s…", i, m.Text, want)
		}
	}
	for i, m := range fake.Ephemerals("U0BOB") {
		if want := "r1" + string(rune('0'+i)); !strings.Contains(m.Text, want) {
			t.Errorf("bob's answer %d is %q, want one about %s", i, m.Text, want)
		}
	}
	var limited int
	for _, c := range fake.Calls("chat.postMessage") {
		if c.Status == 429 {
			limited++
		}
	}
	if limited == 0 {
		t.Error("no 429 was answered: the test tested nothing")
	}
	noUnacked(t, fake)
}

// TestSlackRefusedTokens: Run fails with a clear error that never
// contains the token.
func TestSlackRefusedTokens(t *testing.T) {
	fake := startFake(t)
	cases := map[string]struct {
		bot, app, want string
	}{
		"bot token":   {bot: "xoxb-not-the-right-one", app: slackfake.AppToken, want: "SLACK_BOT_TOKEN was refused by Slack"},
		"app token":   {bot: slackfake.BotToken, app: "xapp-not-the-right-one", want: "SLACK_APP_TOKEN was refused by Slack"},
		"wrong kind":  {bot: slackfake.AppToken, app: slackfake.AppToken, want: `SLACK_BOT_TOKEN does not start with "xoxb-"`},
		"app missing": {bot: slackfake.BotToken, want: "SLACK_APP_TOKEN is not set"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := app.Run(ctx, app.Options{
				ConfigPath: exampleConfig(t, ""), DataDir: dir, LogFile: filepath.Join(dir, "test.log"),
				Clock: clocktesting.NewFakeClock(start),
				Slack: app.SlackOptions{BotToken: tc.bot, AppToken: tc.app, APIURL: fake.APIURL()},
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want an error with %q", err, tc.want)
			}
			for _, tok := range []string{tc.bot, tc.app} {
				if tok != "" && strings.Contains(err.Error(), tok) {
					t.Errorf("the error shows a token: %v", err)
				}
				data, _ := os.ReadFile(filepath.Join(dir, "test.log"))
				if tok != "" && strings.Contains(string(data), tok) {
					t.Errorf("the log shows a token")
				}
			}
		})
	}
}

// TestSlackHealthMetricsAndStrangers: /readyz says whether Slack is
// connected, /metrics has the Slack API latencies, and someone gpubot does
// not know is told how to get added, in private and on App Home.
func TestSlackHealthMetricsAndStrangers(t *testing.T) {
	fake := startFake(t)
	addr := freeAddr(t)
	b := startSlackBotAt(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil, addr)
	b.command("U0MALLORY", chRandom, "status")
	b.ephemeral("U0MALLORY", "I don't know who you are")
	env := fake.AppHomeOpened("U0MALLORY")
	if _, err := fake.WaitAck(waitCtx(t), env); err != nil {
		t.Fatal(err)
	}
	b.waitFor("App Home for a stranger", func() bool {
		for _, v := range fake.Views() {
			if v.Method == "views.publish" && v.User == "U0MALLORY" && v.Error == "" {
				return true
			}
		}
		return false
	})
	b.command("U0DAVE", chRandom, "request 8xh100 for 4h")
	b.card(chVision, "r10")
	get := func(path string) (int, string) { return httpGet(addr, path) }
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	// A call is observed when its answer has been read, which can be
	// just after the fake has shown its effect.
	b.waitFor("the Slack API latencies in /metrics", func() bool {
		_, metrics := get("/metrics")
		for _, m := range []string{
			`gpubot_slack_api_request_duration_seconds_count{method="chat.postMessage"}`,
			`gpubot_slack_api_request_duration_seconds_count{method="apps.connections.open"}`,
			`gpubot_slack_api_request_duration_seconds_count{method="views.publish"}`,
		} {
			if !strings.Contains(metrics, m) {
				return false
			}
		}
		return true
	})
	noUnacked(t, fake)
	// Slack gone: not ready.
	fake.Close()
	b.waitFor("not ready", func() bool { code, _ := get("/readyz"); return code == http.StatusServiceUnavailable })
	_, body := get("/readyz")
	if !strings.Contains(body, "Slack not connected") {
		t.Errorf("/readyz when Slack is gone: %s", body)
	}
}

// TestSlackMatchByEmail: with slack.matchByEmail, a person configured
// with an email but no slackID is found by their Slack profile's e-mail,
// both ways: what they type is theirs, and gpubot can DM them.
func TestSlackMatchByEmail(t *testing.T) {
	noID := func(t *testing.T, extra string) string {
		path := exampleConfig(t, extra)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		src := strings.Replace(string(data), "{name: alice, slackID: U0ALICE, email: alice@example.com}", "{name: alice, email: alice@example.com}", 1)
		if src == string(data) {
			t.Fatal("the example's alice changed; update the test")
		}
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Run("off", func(t *testing.T) {
		fake := startFake(t)
		b := startSlackBot(t, fake, t.TempDir(), noID(t, fastPosting), nil)
		b.command("U0ALICE", chRandom, "status")
		b.ephemeral("U0ALICE", "I don't know who you are")
	})
	t.Run("on", func(t *testing.T) {
		fake := startFake(t)
		b := startSlackBot(t, fake, t.TempDir(), noID(t, fastPosting+"  matchByEmail: true\n"), nil)
		b.command("U0ALICE", chRandom, `request 8xh100 for 4h reason "eval run"`)
		r10 := b.card(chNLP, "r10")
		if !strings.Contains(r10.Text, "needs approval") {
			t.Fatalf("card: %q", r10.Text)
		}
		b.ephemeral("U0ALICE", "r10 needs approval")
		b.click("U0BOB", r10, "approve")
		b.waitFor("a DM to alice, found by e-mail", func() bool {
			for _, m := range fake.DMs("U0ALICE") {
				if strings.Contains(m.Text, "bob approved your request r10") {
					return true
				}
			}
			return false
		})
		env := fake.AppHomeOpened("U0ALICE")
		if _, err := fake.WaitAck(waitCtx(t), env); err != nil {
			t.Fatal(err)
		}
		b.waitFor("alice's App Home", func() bool {
			for _, v := range fake.Views() {
				if v.Method == "views.publish" && v.User == "U0ALICE" && strings.Contains(string(v.View), "r10") {
					return true
				}
			}
			return false
		})
		if n := len(fake.Calls("users.info")); n != 1 {
			t.Errorf("users.info called %d times; want 1 (the answer is remembered)", n)
		}
		noUnacked(t, fake)
	})
}

// TestSlackModeRaisesProcs: Slack mode runs more Go processors than CPUs
// (see slackProcs), unless GOMAXPROCS is set or Go runs below the CPUs.
func TestSlackModeRaisesProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || before != runtime.NumCPU() {
		t.Skipf("GOMAXPROCS is %d (env %q) on %d CPUs: Slack mode leaves it", before, os.Getenv("GOMAXPROCS"), runtime.NumCPU())
	}
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting), nil)
	b.command("U0CAROL", chRandom, "help")
	b.waitFor("the answer", func() bool { return len(fake.Ephemerals("U0CAROL")) == 1 })
	if got, want := runtime.GOMAXPROCS(0), 4*runtime.NumCPU(); got != want {
		t.Errorf("GOMAXPROCS in Slack mode = %d, want %d", got, want)
	}
}
