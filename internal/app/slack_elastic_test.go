package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/deploy"
)

// elasticExample is the bundled example with nlp's elastic budget cut to
// $600 a week, the offer made after 15 minutes of waiting, and its
// simulated DWS failing each request's first provisioning attempt, Kueue
// retrying after 2 minutes.
func elasticExample(t testing.TB, extra string) string {
	t.Helper()
	cfg := strings.NewReplacer(
		"elasticBudget: {moneyPerWeek: 5000}", "elasticBudget: {moneyPerWeek: 600}",
		"simulation: {provisioningTime: 25m}", "simulation: {provisioningTime: 25m, failAttempts: 1}",
		"      prior: 20m", "      retryBackoff: 2m\n      prior: 20m",
		"offerAfter: 1h", "offerAfter: 15m",
	).Replace(string(deploy.ExampleConfig))
	if !strings.Contains(cfg, "failAttempts: 1") || !strings.Contains(cfg, "retryBackoff: 2m") || !strings.Contains(cfg, "moneyPerWeek: 600") || !strings.Contains(cfg, "offerAfter: 15m") {
		t.Fatal("the bundled example changed: elasticExample no longer applies")
	}
	path := filepath.Join(t.TempDir(), "gpubot.yaml")
	if err := os.WriteFile(path, []byte(cfg+"\n"+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitCardHas waits for the card of id in channel to contain s.
func (b *slackBot) waitCardHas(channel, id, s string) slackfake.Message {
	b.t.Helper()
	var m slackfake.Message
	b.waitFor("card "+id+" to say "+s, func() bool {
		m = b.card(channel, id)
		return strings.Contains(m.Text+string(m.Blocks), s)
	})
	return m
}

// press clicks the Switch button whose value is value on card.
func (b *slackBot) press(user string, card slackfake.Message, value string) {
	b.t.Helper()
	bt := slackButton(b.t, card, "switch", value)
	if bt.actionID == "" {
		b.t.Fatalf("no Switch button %s on %s:\n%s", value, card.Text, card.Blocks)
	}
	env := b.fake.ClickButton(user, card.Channel, card.TS, bt.actionID, bt.blockID, bt.value)
	if _, err := b.fake.WaitAck(waitCtx(b.t), env); err != nil {
		b.t.Fatal(err)
	}
}

// TestSlackElasticOnTheSimulatedCluster: elastic capacity end to end on
// the fake Slack with the simulated cluster, whose clock the test steps.
// A request switched to DWS is told, in its thread, that Kueue asked for
// nodes, that the first attempt failed (its owner too) and was retried,
// and that the retry provisioned; it is admitted on the new nodes. One
// switched to spot loses its node after 3 hours: its owner is told and it
// is queued again with a new estimate. Once the team's budget is spent,
// the card shows the options greyed with why, without buttons, and
// /gpu switch is refused with the same reason.
func TestSlackElasticOnTheSimulatedCluster(t *testing.T) {
	fake := startFake(t)
	b := startSlackBot(t, fake, t.TempDir(), elasticExample(t, fastPosting), nil)

	// bob's 40 GPUs fill the reserved h100s for hours.
	// (Its estimate, and so its offer, may come with the refresher's next
	// pass, which started with gpubot: the card is updated then.)
	b.command("U0BOB", chRandom, "request 40xh100 for 8h")
	b.waitCardHas(chNLP, "r10", "h100-dws (provisioned): in about 20m (assumed: no provisioning seen yet), ≈ $1,728 (320 GPU-hours), runs at most 7d — not available: over nlp's elastic budget: $0 of $600 a week used or committed, this needs $1,728")

	// r11 would wait: the card offers spot and DWS, each with a button.
	b.command("U0BOB", chRandom, "request 16xh100 for 2h")
	card := b.waitCardHas(chNLP, "r11", "Sooner on elastic capacity")
	for _, want := range []string{"h100-spot (spot): now, may be reclaimed, ≈ $102 (32 GPU-hours)", "h100-dws (provisioned): in about 20m (assumed: no provisioning seen yet), ≈ $173 (32 GPU-hours)"} {
		if !strings.Contains(string(card.Blocks), want) {
			t.Errorf("r11's card lacks %q:\n%s", want, card.Blocks)
		}
	}
	// So would r12.
	b.command("U0BOB", chRandom, "request 16xh100 for 5h")
	spot := b.waitCardHas(chNLP, "r12", "Sooner on elastic capacity")

	b.press("U0BOB", card, "r11|h100-dws")
	b.threadHas(card, "Switched to h100-dws (provisioned) by bob", "Kueue asked the cluster autoscaler for 2 nodes of h100-dws (admission check dws-h100). Provisioning starts it in about 20m")
	b.waitCardHas(chNLP, "r11", "waits for provisioning")

	// r12 goes to spot at once.
	b.press("U0BOB", spot, "r12|h100-spot")
	b.threadHas(spot, "Switched to h100-spot (spot) by bob", "Admitted at once on h100-spot-")

	// $173 + $256 of $600 are committed: 16 GPUs for 8h fit on neither.
	b.command("U0BOB", chRandom, "request 16xh100 for 8h")
	over := b.waitCardHas(chNLP, "r13", "Sooner on elastic capacity")
	blocks := string(over.Blocks)
	for _, want := range []string{
		"h100-spot (spot): now, may be reclaimed, ≈ $410 (128 GPU-hours), runs at most 1d — not available: over nlp's elastic budget: $429 of $600 a week used or committed, this needs $410",
		"h100-dws (provisioned): in about 20m (assumed: no provisioning seen yet), ≈ $691 (128 GPU-hours), runs at most 7d — not available: over nlp's elastic budget",
	} {
		if !strings.Contains(blocks, want) {
			t.Errorf("r13's card lacks %q:\n%s", want, blocks)
		}
	}
	for _, f := range []string{"h100-spot", "h100-dws"} {
		if bt := slackButton(t, over, "switch", "r13|"+f); bt.actionID != "" {
			t.Errorf("r13's card has a button for the over-budget %s", f)
		}
	}
	b.command("U0BOB", chRandom, "switch r13 h100-spot")
	b.ephemeral("U0BOB", "r13 cannot switch to h100-spot: over nlp's elastic budget: $429 of $600 a week used or committed, this needs $410. Nothing was changed.")

	// r11's first attempt fails after 25 minutes; Kueue retries 2
	// minutes later; the retry provisions 25 minutes after that.
	b.clock.Step(25 * time.Minute)
	b.threadHas(card, "Provisioning failed (attempt 1): no capacity for 2 nodes of h100-dws in the zone (simulated). Kueue gives the quota back and tries again after a back-off")
	b.dm("U0BOB", "Provisioning of your request r11 on h100-dws failed (attempt 1)")
	b.clock.Step(2 * time.Minute)
	b.threadHas(card, "Provisioning failed (attempt 1)", "Provisioning again, attempt 2")
	b.clock.Step(25 * time.Minute)
	got := b.threadHas(card, "Provisioning again, attempt 2", "Provisioned after 25m: the h100-dws nodes are there, and Kueue admits it onto them", "Admitted after 52m on h100-dws-")
	t.Logf("r11's thread: %q", got)
	b.waitCardHas(chNLP, "r11", "r11 running on h100-dws-")

	// r12 loses its spot node after 3 hours of its 5: bob is told, and it
	// is queued again on spot with a new estimate.
	b.clock.SetTime(start.Add(3*time.Hour + time.Minute))
	got = b.threadHas(spot, "Admitted at once on h100-spot-", "Its spot nodes were reclaimed after running 3h (spot node h100-spot-b1-r1-n1 reclaimed (simulated)); it is queued again on h100-spot. A new estimate follows.", "Admitted at once on h100-spot-")
	t.Logf("r12's thread: %q", got)
	b.dm("U0BOB", "Your request r12 lost its spot nodes after running 3h")
	noUnacked(t, fake)
}
