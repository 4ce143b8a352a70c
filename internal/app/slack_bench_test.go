package app_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	stdslices "slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// benchConfig is the example with fast posting and no approval for
// borrowing, so that requests over quota queue in the cluster.
func benchConfig(tb testing.TB) string {
	tb.Helper()
	path := exampleConfig(tb, fastPosting)
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	src := strings.Replace(string(data), "borrowing: true", "borrowing: false", 1)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// seedPending fills dir's store with n requests waiting in the simulated
// cluster, made through the command service as a Slack run would.
func seedPending(tb testing.TB, dir, cfgPath string, n int) {
	tb.Helper()
	ctx := context.Background()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	clk := clocktesting.NewFakeClock(start)
	// The simulated cluster keeps its state in memory while seeding and
	// saves it once at the end: saving the whole state after each of
	// thousands of requests would take most of an hour.
	mem := &memState{}
	sim, _, err := simcluster.New(ctx, cfg.Cluster(), mem, clk)
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: clk})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := svc.Seed(ctx, cfg.Seeds()); err != nil {
		tb.Fatal(err)
	}
	users := []string{"U0ALICE", "U0DAVE", "U0GRACE", "U0BOB", "U0ERIN", "U0FRANK"}
	for i := range n {
		svc.Handle(ctx, commands.Input{User: users[i%len(users)], Text: fmt.Sprintf("request %dxh100 for %dh", 8*(1+i%2), 1+i%6)})
	}
	if err := db.PutState(ctx, simcluster.StateName, mem.data); err != nil {
		tb.Fatal(err)
	}
	queued, err := db.ListRequests(ctx, func(r records.Request) bool { return r.State == records.StateQueued })
	if err != nil {
		tb.Fatal(err)
	}
	if len(queued) < n*9/10 {
		tb.Fatalf("only %d of %d requests are pending", len(queued), n)
	}
}

// memState is a simcluster.StateStore in memory.
type memState struct{ data []byte }

func (m *memState) GetState(context.Context, string) ([]byte, error) {
	if m.data == nil {
		return nil, records.ErrNotFound
	}
	return m.data, nil
}

func (m *memState) PutState(_ context.Context, _ string, data []byte) error {
	m.data = append([]byte(nil), data...)
	return nil
}

// cpuTime is the CPU the process has used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's peak resident set size in MB (VmHWM), or 0.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// BenchmarkSlackAckLatency measures how long the fake Slack waits for the
// ack of a /gpu command, end to end through slack-go's Socket Mode client,
// at a steady command rate with thousands of requests pending in the
// simulated cluster. Reported: p50 and p99 ack latency, and p50 and p99
// time to the answer (the ephemeral reply); for requests, the time to
// the card first showing an estimate; the commands refused as busy (the
// runtime's queue full: answered at once, so the answer times include
// them); the requests whose own estimate came from the last computation's
// checkpoints (own-from-checkpoints); the process's CPU for the commands. Tune with GPUBOT_BENCH_PENDING
// (default 2000), GPUBOT_BENCH_RATE (commands per second, default 20) and
// GPUBOT_BENCH_REQUEST (the request command, default "request 1xa100 for
// 1h", which the seeded H100 queue does not hold up).
func BenchmarkSlackAckLatency(b *testing.B) {
	pending := envInt(b, "GPUBOT_BENCH_PENDING", 2000)
	rate := envInt(b, "GPUBOT_BENCH_RATE", 20)
	dir, cfg := b.TempDir(), benchConfig(b)
	copySeeded(b, dir, cfg, pending)
	fake := startFake(b)
	addr := freeAddr(b)
	bot := startSlackBotAt(b, fake, dir, cfg, clocktesting.NewFakeClock(start), addr)
	// Warm up: the connection is up and the service has answered once.
	bot.command("U0CAROL", chRandom, "capacity")
	bot.waitFor("the warm-up answer", func() bool { return len(fake.Ephemerals("U0CAROL")) == 1 })

	request := "request 1xa100 for 1h"
	if v := os.Getenv("GPUBOT_BENCH_REQUEST"); v != "" {
		request = v
	}
	texts := []string{"status", "capacity", "whatif 8xh100 for 2h", request, "usage"}
	users := []string{"U0ALICE", "U0DAVE", "U0GRACE", "U0BOB", "U0ERIN", "U0FRANK"}
	sent := map[string]time.Time{}     // envelope → sent
	byUser := map[string][]time.Time{} // user → when each command was sent
	kinds := map[string][]bool{}       // user → whether each command was a request
	answersBefore := map[string]int{}
	for _, u := range users {
		answersBefore[u] = len(fake.Ephemerals(u))
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	cpuBefore := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		u := users[i%len(users)]
		at := time.Now()
		env := fake.SlashCommand(u, chRandom, texts[i%len(texts)])
		sent[env] = at
		byUser[u] = append(byUser[u], at)
		kinds[u] = append(kinds[u], strings.HasPrefix(texts[i%len(texts)], "request"))
	}
	// Every command is answered privately (a request also gets a card),
	// and acked: the runtime queues a command for its worker before it
	// acks it, so an answer can reach the fake first.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := fake.WaitFor(ctx, func() bool {
		for u, cmds := range byUser {
			if len(fake.Ephemerals(u))-answersBefore[u] < len(cmds) {
				return false
			}
		}
		n := 0
		for _, a := range fake.Acks() {
			if _, ok := sent[a.EnvelopeID]; ok {
				n++
			}
		}
		return n >= len(sent)
	}); err != nil {
		b.Fatalf("waiting for every answer: %v", err)
	}
	b.StopTimer()
	// The process's CPU for the commands (the fake Slack's included):
	// what the load of other work on the machine changes least.
	cpu := (cpuTime() - cpuBefore).Seconds()
	var acks, answers, reads, requests []float64
	var asked []requestAsked // each request command and when it was sent
	refused := 0             // answered "gpubot is very busy" (the runtime's queue was full)
	for _, a := range fake.Acks() {
		if _, ok := sent[a.EnvelopeID]; ok {
			acks = append(acks, float64(a.Latency)/float64(time.Millisecond))
		}
	}
	if len(acks) != b.N {
		b.Fatalf("%d acks for %d commands", len(acks), b.N)
	}
	// One person's commands are answered in order, one answer each.
	began := time.Now()
	for _, cmds := range byUser {
		if len(cmds) > 0 && cmds[0].Before(began) {
			began = cmds[0]
		}
	}
	slowBySecond := map[int]int{} // answers over 500 ms, by the second of the run they were sent in
	for u, cmds := range byUser {
		got := fake.Ephemerals(u)[answersBefore[u]:]
		if len(got) != len(cmds) {
			b.Fatalf("%s: %d answers to %d commands", u, len(got), len(cmds))
		}
		for i, m := range got {
			ms := float64(m.PostedAt.Sub(cmds[i])) / float64(time.Millisecond)
			answers = append(answers, ms)
			if ms > 500 {
				slowBySecond[int(cmds[i].Sub(began).Seconds())]++
			}
			if strings.HasPrefix(m.Text, "gpubot is very busy") {
				refused++
			}
			if kinds[u][i] {
				requests = append(requests, ms)
				// A request made answers with its card's text, "rN …";
				// anything else (busy, refused) made none.
				if id, _, _ := strings.Cut(m.Text, " "); requestID.MatchString(id) {
					asked = append(asked, requestAsked{id: id, at: cmds[i]})
				}
			} else {
				reads = append(reads, ms)
			}
		}
	}
	// A request's card may be posted before its estimate is worked out
	// (under load the refresher's next pass fills it in): the time to the
	// estimate is until the card shows one.
	estimated := timesToEstimate(b, fake, asked)
	stdslices.Sort(acks)
	stdslices.Sort(answers)
	stdslices.Sort(reads)
	stdslices.Sort(requests)
	b.ReportMetric(quantile(reads, 0.99), "p99-read-answer-ms")
	b.ReportMetric(quantile(requests, 0.5), "p50-request-answer-ms")
	b.ReportMetric(quantile(requests, 0.99), "p99-request-answer-ms")
	b.ReportMetric(quantile(estimated, 0.5), "p50-request-estimate-ms")
	b.ReportMetric(quantile(estimated, 0.99), "p99-request-estimate-ms")
	b.ReportMetric(float64(refused), "refused-busy")
	b.ReportMetric(counter(b, addr, "gpubot_estimate_from_checkpoints_total"), "own-from-checkpoints")
	b.ReportMetric(cpu, "cpu-s")
	b.ReportMetric(peakRSS(), "peak-rss-MB")
	b.ReportMetric(quantile(acks, 0.5), "p50-ack-ms")
	b.ReportMetric(quantile(acks, 0.99), "p99-ack-ms")
	b.ReportMetric(quantile(acks, 1), "max-ack-ms")
	b.ReportMetric(quantile(answers, 0.5), "p50-answer-ms")
	b.ReportMetric(quantile(answers, 0.99), "p99-answer-ms")
	b.ReportMetric(0, "ns/op")
	// Said before the checks, so that a failing run still shows its figures.
	b.Logf("ack p50 %.1f p99 %.1f max %.1f ms; answer p50 %.0f p99 %.0f ms; reads p99 %.0f ms; requests p50 %.0f p99 %.0f ms; request estimate p50 %.0f p99 %.0f ms (%d of %d); %d of %d refused as busy; %.1f s of CPU; peak RSS %.0f MB",
		quantile(acks, 0.5), quantile(acks, 0.99), quantile(acks, 1), quantile(answers, 0.5), quantile(answers, 0.99),
		quantile(reads, 0.99), quantile(requests, 0.5), quantile(requests, 0.99),
		quantile(estimated, 0.5), quantile(estimated, 0.99), len(estimated), len(asked), refused, b.N, cpu, peakRSS())
	if len(slowBySecond) > 0 {
		secs := stdslices.Sorted(maps.Keys(slowBySecond))
		var parts []string
		for _, sec := range secs {
			parts = append(parts, fmt.Sprintf("%ds:%d", sec, slowBySecond[sec]))
		}
		b.Logf("answers over 500 ms, by the second of the run they were sent in: %s", strings.Join(parts, " "))
	}
	if len(estimated) != len(asked) {
		b.Errorf("%d of %d request cards never showed an estimate", len(asked)-len(estimated), len(asked))
	}
	noUnacked(b, fake)
}

var requestID = regexp.MustCompile(`^r[0-9]+$`)

// requestAsked is a request command: the request's ID (from its answer)
// and when the command was sent.
type requestAsked struct {
	id string
	at time.Time
}

// timesToEstimate waits (up to a minute) for every asked request's card
// to say when it starts, and returns, sorted, each one's time in ms from
// its command to the card version that first did. A card says so unless
// it is "rN queued" alone (the estimate is being worked out); one that
// moved on (running, will not start) counts from that version.
func timesToEstimate(b *testing.B, fake *slackfake.Server, asked []requestAsked) []float64 {
	b.Helper()
	cards := func() map[string]slackfake.Message {
		out := map[string]slackfake.Message{}
		for _, ch := range []string{chNLP, chVision, chGPU} {
			for _, m := range fake.Messages(ch) {
				if id, _, ok := strings.Cut(m.Text, " "); ok && m.ThreadTS == "" {
					out[id] = m
				}
			}
		}
		return out
	}
	settled := func(id, text string) bool { return text != id+" queued" }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = fake.WaitFor(ctx, func() bool {
		cs := cards()
		for _, a := range asked {
			if m, ok := cs[a.id]; !ok || !settled(a.id, m.Text) {
				return false
			}
		}
		return true
	})
	cs := cards()
	var out []float64
	missing, unsettled := 0, 0
	for _, a := range asked {
		m, ok := cs[a.id]
		if !ok {
			if missing++; missing <= 3 {
				b.Logf("no card for %q", a.id)
			}
			continue
		}
		if !settled(a.id, m.Text) {
			if unsettled++; unsettled <= 3 {
				b.Logf("card %s without an estimate: %q", a.id, m.Text)
			}
		}
		// Version k's text is History[k].Text (the current one last); it
		// was posted at PostedAt (k = 0) or when version k-1 was replaced.
		texts, ats := []string{}, []time.Time{m.PostedAt}
		for _, h := range m.History {
			texts = append(texts, h.Text)
			ats = append(ats, h.At)
		}
		texts = append(texts, m.Text)
		for k, t := range texts {
			if settled(a.id, t) {
				out = append(out, float64(ats[k].Sub(a.at))/float64(time.Millisecond))
				break
			}
		}
	}
	if missing+unsettled > 0 {
		b.Logf("%d request cards not posted, %d without an estimate, a minute after the last answer", missing, unsettled)
	}
	stdslices.Sort(out)
	return out
}

// seeded caches one seeded store per pending count, so that the
// benchmark's runs (b.N = 1, then the real one) seed only once.
var seeded = map[int][]byte{}

func copySeeded(tb testing.TB, dir, cfg string, n int) {
	tb.Helper()
	// GPUBOT_BENCH_SEEDED names a file that keeps the seeded store between
	// runs (seeding 10 000 requests takes minutes): made if missing.
	cache := os.Getenv("GPUBOT_BENCH_SEEDED")
	if seeded[n] == nil && cache != "" {
		if data, err := os.ReadFile(cache); err == nil {
			seeded[n] = data
		}
	}
	if seeded[n] == nil {
		tmp := tb.TempDir()
		seedPending(tb, tmp, cfg, n)
		data, err := os.ReadFile(filepath.Join(tmp, "gpubot.db"))
		if err != nil {
			tb.Fatal(err)
		}
		seeded[n] = data
		if cache != "" {
			if err := os.WriteFile(cache, data, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "gpubot.db"), seeded[n], 0o600); err != nil {
		tb.Fatal(err)
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func envInt(tb testing.TB, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

// counter is the value of the unlabelled counter name on gpubot's
// /metrics at addr.
func counter(b *testing.B, addr, name string) float64 {
	b.Helper()
	code, body := httpGet(addr, "/metrics")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok && code == http.StatusOK {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("/metrics: %s: %v", name, err)
			}
			return f
		}
	}
	b.Fatalf("/metrics (%d) lacks %s", code, name)
	return 0
}
