package app_test

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/deploy"
)

// onlyClusterDigest writes the bundled example with its digests replaced
// by one cluster-wide digest at 09:00 every day into #gpu-admins, and
// returns its path.
func onlyClusterDigest(t *testing.T) string {
	t.Helper()
	example := string(deploy.ExampleConfig)
	i := strings.Index(example, "\ndigests:")
	if i < 0 {
		t.Fatal("the example has no digests")
	}
	path := filepath.Join(t.TempDir(), "gpubot.yaml")
	cfg := example[:i] + "\n" + fastPosting + "digests:\n  - {channel: \"#gpu-admins\", schedule: \"0 9 * * *\"}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSlackDigestWithChart: on Slack with the simulated cluster, the
// cluster digest is posted into its channel at 09:00 of the (fake)
// clock, once, with its chart uploaded by the files upload flow; when
// Slack refuses the next day's upload, the digest still posts, the
// chart's text follows in its thread, and the operator log says why.
func TestSlackDigestWithChart(t *testing.T) {
	fake := startFake(t)
	// Tuesday 07:00 in Berlin.
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC))
	b := startSlackBot(t, fake, t.TempDir(), onlyClusterDigest(t), clk)
	b.command("U0DAVE", chRandom, `request 8xh100 for 4h reason "detector ablation"`)
	b.card(chVision, "r10")

	clk.SetTime(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) // 09:00
	admins := fake.ChannelID("#gpu-admins")
	b.waitFor("the digest and its chart in #gpu-admins", func() bool {
		ms := fake.Messages(admins)
		return len(ms) == 2 && ms[1].Via == "files.completeUploadExternal"
	})
	ms := fake.Messages(admins)
	if !strings.HasPrefix(ms[0].Text, "Daily digest for the cluster, Mon 30 Nov:") || ms[0].ThreadTS != "" {
		t.Errorf("digest message = %q (thread %q)", ms[0].Text, ms[0].ThreadTS)
	}
	if strings.Contains(string(ms[0].Blocks), "Posted late") {
		t.Error("the digest posted at 09:00 says it is late")
	}
	var chart *slackfake.File
	for _, f := range fake.Files() {
		if f.Channel == admins && f.Completed {
			chart = &f
		}
	}
	if chart == nil || chart.Name != "gpubot-digest-cluster-2026-11-30.png" || !strings.Contains(chart.AltText, "GPU-hours per day") {
		t.Fatalf("chart upload = %+v", chart)
	}
	if _, err := png.Decode(bytes.NewReader(chart.Content)); err != nil {
		t.Errorf("uploaded chart is not a PNG: %v", err)
	}

	// Half an hour later nothing more is posted.
	clk.SetTime(time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC))
	b.command("U0CAROL", chRandom, "status")
	b.ephemeral("U0CAROL", "no open requests")
	if n := len(fake.Messages(admins)); n != 2 {
		t.Errorf("%d messages in #gpu-admins after 09:30, want 2", n)
	}

	// Wednesday 09:00: Slack refuses the upload (no files:write scope).
	fake.FailNext("files.getUploadURLExternal", "missing_scope")
	clk.SetTime(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	b.waitFor("Wednesday's digest and the chart's text in its thread", func() bool {
		return len(fake.Messages(admins)) == 4
	})
	ms = fake.Messages(admins)
	if !strings.HasPrefix(ms[2].Text, "Daily digest for the cluster, Tue 1 Dec:") {
		t.Errorf("Wednesday's digest = %q", ms[2].Text)
	}
	if ms[3].ThreadTS != ms[2].TS || !strings.Contains(ms[3].Text, "The chart could not be attached") || !strings.Contains(string(ms[3].Blocks), "GPU-hours per day") {
		t.Errorf("fallback = %q in thread %q (digest %q): %s", ms[3].Text, ms[3].ThreadTS, ms[2].TS, ms[3].Blocks)
	}
	if log := b.log(); !strings.Contains(log, "Slack refused the upload of a chart") || !strings.Contains(log, "missing_scope") {
		t.Errorf("the operator log does not say why the chart is missing")
	}
	noUnacked(t, fake)
}
