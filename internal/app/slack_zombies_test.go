package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/records"
)

// dm waits for a direct message to user containing s.
func (b *slackBot) dm(user, s string) slackfake.Message {
	b.t.Helper()
	var found slackfake.Message
	b.waitFor("a DM to "+user+" saying "+s, func() bool {
		for _, m := range b.fake.DMs(user) {
			if strings.Contains(m.Text, s) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// TestSlackZombies: ten minutes in, the sweep asks the owners of the
// example's idle and never-ready seeds by direct message, with Still
// using it and Release buttons. grace presses Still using it; frank does
// not answer, so half an hour later carol is told about his (and frank,
// speech's lead, is not told about grace's); then frank presses Release.
func TestSlackZombies(t *testing.T) {
	fake := startFake(t)
	dir := t.TempDir()
	b := startSlackBot(t, fake, dir, exampleConfig(t, fastPosting), nil)
	b.dm("U0FRANK", "its pods are not all running") // the pods report at start
	b.clock.Step(10 * time.Minute)
	grace := b.dm("U0GRACE", "Your request r4 (6× h100, speech) holds 6 GPUs but looks unused")
	frank := b.dm("U0FRANK", "Your request r7 (5× h100, speech) holds 5 GPUs but looks unused")
	for _, m := range []slackfake.Message{grace, frank} {
		findButton(t, m, "keep")
		findButton(t, m, "release")
	}
	if bt := findButton(t, grace, "keep"); bt.value != "r4|z1" {
		t.Errorf("grace's Still using it carries %q, want r4|z1", bt.value)
	}
	b.click("U0GRACE", grace, "keep")
	b.ephemeral("U0GRACE", "Noted: r4 stays.")
	// A second press is answered, not applied again.
	b.click("U0GRACE", grace, "keep")
	b.ephemeral("U0GRACE", "Zombie check z1 is already closed (kept by grace")

	b.clock.Step(30 * time.Minute)
	carol := b.dm("U0CAROL", "r7 (5× h100, speech) holds 5 GPUs without using them")
	if !strings.Contains(carol.Text, "frank did not answer within 30m") {
		t.Errorf("carol was told %q", carol.Text)
	}
	findButton(t, carol, "release")
	for _, m := range fake.DMs("U0FRANK") {
		if strings.Contains(m.Text, "r4 (") {
			t.Errorf("frank, speech's lead, was told about r4 after grace kept it: %q", m.Text)
		}
	}
	b.click("U0FRANK", frank, "release")
	b.ephemeral("U0FRANK", "r7: released by frank")
	noUnacked(t, fake)

	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	db := open(t, dir)
	var got []string
	for _, id := range []string{"z1", "z2"} {
		z, err := db.GetZombie(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, z.ID+" "+z.Request+" "+string(z.Outcome)+" "+z.ResolvedBy)
	}
	if want := []string{"z1 r4 kept grace", "z2 r7 released-by-owner frank"}; strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("zombies %q, want %q", got, want)
	}
	if r := request(t, db, "r7"); r.State != records.StateFinished || r.EndReason != "released by frank" {
		t.Errorf("r7 %s (%s)", r.State, r.EndReason)
	}
	if r := request(t, db, "r4"); r.State != records.StateRunning {
		t.Errorf("r4, kept, is %s (%s)", r.State, r.EndReason)
	}
}
