package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/deploy"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

var slackUsers = []slackfake.User{
	{ID: "U0ALICE", Name: "alice"}, {ID: "U0BOB", Name: "bob"}, {ID: "U0CAROL", Name: "carol"},
	{ID: "U0DAVE", Name: "dave"}, {ID: "U0ERIN", Name: "erin"}, {ID: "U0FRANK", Name: "frank"},
	{ID: "U0GRACE", Name: "grace"},
}

// startSlack starts gpubot on the fake Slack with dir's data and waits
// until it is connected.
func startSlack(t *testing.T, bin, dir, cfg string, fake *slackfake.Server) (*exec.Cmd, chan error) {
	t.Helper()
	before := fake.ConnectCount()
	cmd := exec.Command(bin, "slack", "--data-dir", dir, "--config", cfg, "--log-file", filepath.Join(dir, "gpubot.log"))
	cmd.Env = append(os.Environ(), "SLACK_BOT_TOKEN="+slackfake.BotToken, "SLACK_APP_TOKEN="+slackfake.AppToken, "SLACK_API_URL="+fake.APIURL())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fake.WaitFor(ctx, func() bool { return fake.ConnectCount() > before && fake.Connections() > 0 }); err != nil {
		_ = cmd.Process.Kill()
		log, _ := os.ReadFile(filepath.Join(dir, "gpubot.log"))
		t.Fatalf("gpubot did not connect: %v\n%s", err, log)
	}
	return cmd, done
}

// TestSlackSurvivesKills: gpubot on (fake) Slack is SIGKILLed at random
// moments while people type; after each restart, and at the end, every
// request whose command Slack saw acked is in the store (it was kept in
// the inbox before the ack), agrees with the simulated cluster, is
// audited once and has one card, posted once and updated since (again
// only for a kill in a channel whose ID gpubot could not know yet, see
// below); nothing is left in the inbox or the outbox.
func TestSlackSurvivesKills(t *testing.T) {
	cycles := crashCycles(t)
	bin := binary(t)
	fake := slackfake.Start(t, slackfake.WithUsers(slackUsers...))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gpubot.yaml")
	fast := "slack:\n  messagesPerSecond: 100\n  burst: 100\n"
	if err := os.WriteFile(cfg, []byte(string(deploy.ExampleConfig)+"\n"+fast), 0o600); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, uint64(cycles)))
	sent := map[string]string{} // envelope → the reason of its request
	for k := range cycles {
		cmd, done := startSlack(t, bin, dir, cfg, fake)
		for i, u := range []string{"U0ALICE", "U0DAVE", "U0GRACE"} {
			reason := fmt.Sprintf("crash %d.%d", k, i)
			env := fake.SlashCommand(u, "#random", fmt.Sprintf(`request %dxh100 for 1h reason "%s"`, 2*(1+i), reason))
			sent[env] = reason
		}
		fake.SlashCommand("U0BOB", "#random", "status")
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // a random moment: the point of the test
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
	// A clean run: it recovers, sends what is left, and stops on SIGTERM.
	cmd, done := startSlack(t, bin, dir, cfg, fake)
	acked := map[string]bool{}
	for _, a := range fake.Acks() {
		if reason, ok := sent[a.EnvelopeID]; ok {
			acked[reason] = true
		}
	}
	ctx := context.Background()
	cardOf := func(reason string) int {
		n := 0
		for _, ch := range []string{"#gpu-nlp", "#gpu-vision", "#gpu-speech", "#gpu"} {
			for _, m := range fake.Messages(ch) {
				if m.ThreadTS == "" && m.Via == "chat.postMessage" && strings.Contains(string(m.Blocks), reason) {
					n++
				}
			}
		}
		return n
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := fake.WaitFor(wctx, func() bool {
		for reason := range acked {
			if cardOf(reason) == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Errorf("not every acked request got its card: %v", err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Errorf("gpubot after SIGTERM: %v", err)
	}

	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.ListRequests(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byReason := map[string][]records.Request{}
	for _, r := range rs {
		if r.Reason != "" {
			byReason[r.Reason] = append(byReason[r.Reason], r)
		}
		if r.State == records.StateLost {
			t.Errorf("%s was marked lost: %s", r.ID, r.EndReason)
		}
	}
	twice := 0
	for reason := range acked {
		got := byReason[reason]
		if len(got) != 1 {
			t.Errorf("the acked request %q is in the store %d times", reason, len(got))
			continue
		}
		if n := cardOf(reason); n != 1 {
			// Again only if a crash came between Slack taking the card
			// and its ts being saved, while the channel's ID was not known
			// yet (no history to look in): at most once per kill.
			twice += max(0, n-1)
			if os.Getenv("GPUBOT_CRASH_DEBUG") != "" {
				for _, ch := range []string{"#gpu-nlp", "#gpu-vision", "#gpu-speech", "#gpu"} {
					for _, m := range fake.Messages(ch) {
						if m.ThreadTS == "" && strings.Contains(string(m.Blocks), reason) {
							t.Logf("%s %s %s edits=%d: %.120s", ch, m.TS, m.Via, m.Edits, m.Text)
						}
					}
				}
				log, _ := os.ReadFile(filepath.Join(dir, "gpubot.log"))
				for _, line := range strings.Split(string(log), "\n") {
					if strings.Contains(line, got[0].ID+" ") || strings.Contains(line, "request="+got[0].ID) || strings.Contains(line, "starting") || strings.Contains(line, "outbox") || strings.Contains(line, "inbox") {
						t.Log(line)
					}
				}
			}
		}
	}
	audit, err := db.Audit(ctx, store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	requested := map[string]int{}
	for _, e := range audit {
		if e.Action == "request" && e.Outcome == "ok" {
			requested[e.Target]++
		}
	}
	for _, r := range rs {
		if r.Origin != "seed" && requested[r.ID] != 1 {
			t.Errorf("%s has %d audit entries for its request, want 1", r.ID, requested[r.ID])
		}
	}
	inbox, err := store.Open(filepath.Join(dir, "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()
	if twice > cycles {
		t.Errorf("%d cards posted more than once in %d kills: more than one per kill", twice, cycles)
	}
	if in, err := inbox.Inbox(ctx); err != nil || len(in) != 0 {
		t.Errorf("the inbox holds %d deliveries after a clean run (%v)", len(in), err)
	}
	if out, err := db.Outbox(ctx); err != nil || len(out) != 0 {
		t.Errorf("the outbox holds %d messages after a clean run (%v)", len(out), err)
		for _, m := range out {
			var o map[string]any
			_ = json.Unmarshal(m.Message, &o)
			t.Logf("left: %d %v", m.Seq, o["To"])
		}
	}
	checkAgainstCluster(t, ctx, db, rs)
	t.Logf("%d kills: %d commands sent, %d acked requests, %d requests in all, %d duplicate cards", cycles, len(sent), len(acked), len(rs), twice)
}
