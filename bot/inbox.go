package bot

import (
	"context"
	"encoding/json"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// Group commit of the inbox (SubmitThen): see the package doc.

// receiving is an event on its way into the inbox, and whom to tell.
type receiving struct {
	ev   Event
	done func(error)
}

// SubmitThen is Submit without waiting: done gets what Submit would
// return, once ev is in the inbox (durable) and queued for a worker, or
// refused. Events given to Submit and SubmitThen are queued in the order
// given. Group commit: the events that arrive while the inbox is being
// written go into it together in the next write, one fsync for all, so
// that the time to the ack stays about one write however many arrive.
// done runs on the runtime's goroutine and must not block.
func (r *Runtime) SubmitThen(ev Event, done func(error)) {
	if r.inbox == nil {
		done(r.submit(ev))
		return
	}
	r.rmu.Lock()
	r.rq = append(r.rq, receiving{ev, done})
	if r.rbusy {
		r.rmu.Unlock()
		return
	}
	r.rbusy = true
	r.rmu.Unlock()
	go r.drainInbox()
}

// drainInbox writes what SubmitThen queued, a batch per write, with the
// handled deliveries to remove, until nothing is left.
func (r *Runtime) drainInbox() {
	for {
		r.rmu.Lock()
		batch := r.rq
		r.rq = nil
		var handled []string
		if len(batch) > 0 || r.rflush {
			handled = r.rdone
			r.rdone, r.rflush = nil, false
		}
		if len(batch) == 0 && len(handled) == 0 {
			r.rbusy = false
			r.ridle.Broadcast()
			r.rmu.Unlock()
			return
		}
		r.rmu.Unlock()
		r.receiveAll(batch, handled)
	}
}

// receiveAll stores batch's keyed events in the inbox in one write, with
// the removal of handled, then queues each for a worker, in order, and
// tells its sender.
func (r *Runtime) receiveAll(batch []receiving, handled []string) {
	var ds []records.Inbound
	var at []int // batch index of ds[i]
	for i, b := range batch {
		if b.ev.Key == "" || b.ev.received {
			continue
		}
		data, err := json.Marshal(struct {
			Order string
			Input commands.Input
		}{b.ev.Order, b.ev.Input})
		if err != nil {
			r.log.Error("keeping a delivery in the inbox", "key", b.ev.Key, "err", err)
			continue
		}
		ds = append(ds, records.Inbound{Key: b.ev.Key, Data: data})
		at = append(at, i)
	}
	dup := make([]bool, len(batch))
	if len(ds) == 0 && len(handled) > 0 {
		if err := r.inbox.Handled(context.Background(), handled...); err != nil {
			r.log.Error("removing handled deliveries from the inbox", "deliveries", len(handled), "err", err)
		}
	}
	if len(ds) > 0 {
		fresh, err := r.inbox.ReceiveAll(context.Background(), ds, r.clock.Now(), r.ttl, handled...)
		if err != nil {
			// Handled without the inbox (and deduplicated at the worker):
			// better than refusing them.
			r.log.Error("keeping deliveries in the inbox", "deliveries", len(ds), "handled", len(handled), "err", err)
			r.rmu.Lock()
			r.rdone = append(handled, r.rdone...) // removed with a later write
			r.rmu.Unlock()
		}
		for j, i := range at {
			switch {
			case err != nil:
			case fresh[j]:
				batch[i].ev.received = true
			default:
				dup[i] = true
			}
		}
	}
	var refused []int // batch indexes of the received deliveries refused as busy
	for i, b := range batch {
		if dup[i] {
			r.log.Info("duplicate delivery dropped", "key", b.ev.Key, "user", b.ev.Input.User)
			b.done(nil)
			continue
		}
		err := r.submit(b.ev)
		if err != nil && b.ev.received {
			// Refused (busy): the sender is told so once it is out of the
			// inbox (it must not be handled later from there), all of the
			// batch's in one write after the others are told.
			refused = append(refused, i)
			continue
		}
		b.done(err)
	}
	if len(refused) == 0 {
		return
	}
	keys := make([]string, len(refused))
	for j, i := range refused {
		keys[j] = batch[i].ev.Key
	}
	if err := r.inbox.Handled(context.Background(), keys...); err != nil {
		r.log.Error("removing refused deliveries from the inbox", "deliveries", len(keys), "err", err)
	}
	for _, i := range refused {
		batch[i].done(ErrBusy)
	}
}
