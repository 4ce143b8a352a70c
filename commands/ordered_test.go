package commands_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
)

// With SetOrderedDelivery, a request's card reaches the sender before the
// refresher's first estimate on it, even when the worker that ran the
// request is slow to deliver what Handle returned: the card is sent as it
// is committed. (Without it the refresher's card update and thread line
// came first, and the Slack adapter, finding no card, skipped them.)
func TestCardIsSentBeforeTheRefresherUpdatesIt(t *testing.T) {
	e, en := twoQueuedHeld(t)

	// One sender, as the runtime has: what is sent at commit and what the
	// refresher returns go to the same log, in the order they come.
	rec := &recorder{}
	e.svc.SetOrderedDelivery(rec.send)
	clk, stop := e.refresher(rec.send)
	e.svc.MarkEstimatesStale()
	<-en.started // the refresher is computing (and held there)

	// The request's worker holds what Handle returned until the
	// refresher's pass with r3 is delivered.
	held := e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 1h"})
	close(en.hold)
	waitFor(t, "the held pass to end", func() bool { return clk.HasWaiters() })
	clk.Step(time.Second)
	waitFor(t, "r3's estimate", func() bool { return e.req("r3").Estimate != nil })
	waitFor(t, "the refresher to wait again", func() bool { return clk.HasWaiters() })
	rec.send(e.ctx, held)
	stop()

	log := rec.all()
	card := slices.IndexFunc(log, func(o commands.Output) bool { return dest(o.To) == "channel #nlp r3" })
	update := slices.IndexFunc(log, func(o commands.Output) bool {
		d := dest(o.To)
		return d == "card r3" || d == "thread r3"
	})
	if card < 0 || update < 0 || card > update {
		t.Fatalf("r3's card post at %d, its first update at %d in %d outputs; want the card first", card, update, len(log))
	}
	check(t, log, want{"card r3", "r3 queued: starts "}, want{"thread r3", "Starts "}, want{"sender", "Its start estimate is being worked out"})
	for _, o := range held {
		if dest(o.To) == "channel #nlp r3" {
			t.Errorf("Handle returned r3's card although it was sent as it was committed")
		}
	}
	n := 0
	for _, o := range log {
		if dest(o.To) == "channel #nlp r3" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("r3's card was posted %d times, want once", n)
	}
}

// A handler in front of the service that changed Input.User (Slack's
// match by e-mail: the person's name) keeps the Slack user in ReplyTo:
// private replies, sent as committed or from the outbox after a restart,
// go there, not to the name.
func TestPrivateRepliesGoToReplyTo(t *testing.T) {
	e := newEnv(t, parse(t, small))
	rec := &recorder{}
	e.svc.SetOrderedDelivery(rec.send)
	e.svc.Handle(e.ctx, commands.Input{User: "alice", ReplyTo: "U0ALICE", Channel: "C0NLP", Text: "request 8xh100 for 4h"})
	sent := rec.all()
	n := 0
	for _, o := range sent {
		if o.To.Kind == commands.ToSender {
			n++
			if o.To.User != "U0ALICE" || o.To.Channel != "C0NLP" {
				t.Errorf("a private reply sent to %q in %q, want U0ALICE in C0NLP", o.To.User, o.To.Channel)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no private reply sent as it was committed: %v", sent)
	}
	kept, err := e.db.Outbox(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range kept {
		o, err := commands.DecodeOutput(m.Message)
		if err != nil {
			t.Fatal(err)
		}
		if o.To.Kind == commands.ToSender && o.To.User != "U0ALICE" {
			t.Errorf("the outbox addresses a private reply to %q, want U0ALICE", o.To.User)
		}
	}
}
