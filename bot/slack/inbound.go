package slackbot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/bot/slack/blockkit"
	"github.com/gpubot/gpubot/commands"
)

// busyText answers a command the runtime has no room for.
const busyText = "gpubot is very busy right now and could not take that; please try again in a minute."

// slash handles a /gpu command: ack first, then the work.
func (a *Adapter) slash(ctx context.Context, d *delivery, cmd slack.SlashCommand) {
	a.remember(cmd.UserID, cmd.ChannelID, cmd.ResponseURL)
	if verb, ok := commands.IsBare(cmd.Text); ok && verb == commands.VerbRequest && cmd.TriggerID != "" {
		d.ack(ctx, nil)
		a.openForm(cmd.UserID, cmd.ChannelID, cmd.TriggerID, d.env.EnvelopeID)
		return
	}
	ev := bot.Event{Key: "slack:env:" + d.env.EnvelopeID, Order: cmd.UserID, Input: commands.Input{User: cmd.UserID, Channel: cmd.ChannelID, ChannelName: cmd.ChannelName, Text: cmd.Text}}
	if cmd.UserID == "" {
		a.malformed(ctx, d, "command", "it names no user")
		return
	}
	taken := func(err error) {
		if err != nil {
			a.log.Warn("command not taken", "user", cmd.UserID, "err", err)
			d.ack(ctx, map[string]string{"response_type": "ephemeral", "text": busyText})
			return
		}
		d.ack(ctx, nil)
	}
	if in, ok := a.in.(asyncInputs); ok {
		// Acked once the command is in the inbox, without holding up the
		// next envelopes: those that arrive meanwhile are written together.
		in.SubmitThen(ev, taken)
		return
	}
	taken(a.in.Submit(ev))
}

// asyncInputs are Inputs that take work without waiting for it to be
// written (group commit); *bot.Runtime is.
type asyncInputs interface {
	SubmitThen(ev bot.Event, done func(error))
}

// openForm opens the request modal for a bare "/gpu request". A person
// gpubot does not know gets the service's answer to the command instead.
func (a *Adapter) openForm(user, channel, trigger, envelope string) {
	first := a.firstTime("slack:form:" + envelope)
	a.q.Enqueue(Call{Lane: "view:" + user, Method: "views.open", Do: func(ctx context.Context) error {
		if !first(ctx) {
			return nil // a redelivery: the form is open already
		}
		d := a.svc.FormDefaults(a.dir.name(ctx, user))
		if !d.Known {
			return a.in.Submit(bot.Event{Key: "slack:env:" + envelope, Order: user, Input: commands.Input{User: user, Channel: channel, Text: "request"}})
		}
		_, err := a.api.OpenViewContext(ctx, trigger, blockkit.RequestForm(blockkit.NewFormOptions(d, channel)))
		if code := slackCode(err); code == "expired_trigger_id" || code == "invalid_trigger_id" {
			// Too late for a modal: say how to type it instead.
			a.q.Enqueue(Call{Lane: "user:" + user, Method: "chat.postEphemeral", Do: func(ctx context.Context) error {
				return a.private(ctx, user, channel, blockkit.Message(commands.Reply{Text: "Opening the request form took too long. Type the request instead, e.g. /gpu request 8xh100 for 4h (/gpu help request has the details)."}))
			}})
			return nil
		}
		return err
	}})
}

// interactive handles buttons and modal submissions.
func (a *Adapter) interactive(ctx context.Context, d *delivery, cb slack.InteractionCallback) {
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		d.ack(ctx, nil)
		a.click(cb)
	case slack.InteractionTypeViewSubmission:
		a.submission(ctx, d, cb)
	default:
		// Shortcuts, view_closed, …: nothing gpubot offers.
		d.ack(ctx, nil)
		a.log.Debug("an interaction gpubot does not handle", "type", string(cb.Type), "envelope", d.env.EnvelopeID)
	}
}

// click turns pressed gpubot buttons into inputs.
func (a *Adapter) click(cb slack.InteractionCallback) {
	user := cb.User.ID
	channel := cb.Container.ChannelID
	if channel == "" {
		channel = cb.Channel.ID
	}
	msgTS := cb.Container.MessageTs
	if msgTS == "" {
		msgTS = cb.Message.Timestamp
	}
	if cb.Container.Type == "view" {
		channel = "" // App Home: answer in a DM
	}
	a.remember(user, channel, cb.ResponseURL)
	for _, ba := range cb.ActionCallback.BlockActions {
		in := commands.Input{User: user, Channel: channel}
		act, err := blockkit.ParseAction(ba.ActionID, ba.Value)
		switch {
		case errors.Is(err, blockkit.ErrNotOurs):
			a.log.Debug("ignoring a press that is not a gpubot button", "actionID", ba.ActionID)
			continue
		case err != nil:
			// gpubot's prefix but not a button gpubot made: answered and
			// audited like any other press.
			a.log.Warn("a press of a gpubot button that gpubot did not make", "user", user, "actionID", cutLog(ba.ActionID), "why", err.Error())
			in.Unreadable = &commands.Unreadable{What: "button", Why: err.Error(), Target: act.Request}
		default:
			in.Action = &act
		}
		key := fmt.Sprintf("slack:click:%s:%s:%s:%s", user, ba.ActionID, msgTS, ba.ActionTs)
		if err := a.in.Submit(bot.Event{Key: key, Order: user, Input: in}); err != nil {
			a.log.Warn("button press not taken", "user", user, "err", err)
			a.q.Enqueue(Call{Lane: "user:" + user, Method: "chat.postEphemeral", Do: func(ctx context.Context) error {
				return a.private(ctx, user, channel, blockkit.Message(commands.Reply{Text: busyText}))
			}})
		}
	}
}

// submission validates a request modal in the ack and, if it is fine,
// handles it as the command it stands for.
func (a *Adapter) submission(ctx context.Context, d *delivery, cb slack.InteractionCallback) {
	if cb.View.CallbackID != blockkit.RequestFormID {
		d.ack(ctx, nil)
		a.log.Debug("a form gpubot did not open", "callbackID", cutLog(cb.View.CallbackID), "envelope", d.env.EnvelopeID)
		return
	}
	text, channel, errs := blockkit.FormCommand(cb.View, a.svc.Vocabulary())
	if len(errs) > 0 {
		d.ack(ctx, slack.NewErrorsViewSubmissionResponse(errs))
		return
	}
	if strings.TrimSpace(text) == "" {
		d.ack(ctx, slack.NewErrorsViewSubmissionResponse(map[string]string{blockkit.FormCount: "Please fill in the request."}))
		return
	}
	if err := a.in.Submit(bot.Event{Key: "slack:env:" + d.env.EnvelopeID, Order: cb.User.ID, Input: commands.Input{User: cb.User.ID, Channel: channel, Text: text}}); err != nil {
		d.ack(ctx, slack.NewErrorsViewSubmissionResponse(map[string]string{blockkit.FormCount: busyText}))
		return
	}
	d.ack(ctx, nil)
}

// eventsAPI handles Events API events: app_home_opened publishes App Home.
func (a *Adapter) eventsAPI(e slackevents.EventsAPIEvent, envelopeID string) {
	home, ok := e.InnerEvent.Data.(*slackevents.AppHomeOpenedEvent)
	if !ok || (home.Tab != "" && home.Tab != "home") {
		return
	}
	key := ""
	if cb, ok := e.Data.(*slackevents.EventsAPICallbackEvent); ok && cb.EventID != "" {
		key = "slack:event:" + cb.EventID
	} else if envelopeID != "" {
		key = "slack:env:" + envelopeID
	}
	a.mu.Lock()
	a.homes[home.User] = a.clock.Now()
	a.mu.Unlock()
	a.publishHome(home.User, a.firstTime(key))
}

// publishHome queues publishing user's Home tab, if first says so.
func (a *Adapter) publishHome(user string, first func(context.Context) bool) {
	a.q.Enqueue(Call{Lane: "home:" + user, Method: "views.publish", Do: func(ctx context.Context) error {
		if !first(ctx) {
			return nil
		}
		_, err := a.api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: user, View: blockkit.Home(a.svc.Home(ctx, a.dir.name(ctx, user)))})
		return err
	}})
}

// refreshHomes keeps open Home tabs current: every homeEvery, if anything
// was sent since the last round (a change that may show on someone's
// Home), it publishes again the Home of everyone who opened it within
// homeKeep. It returns when ctx ends.
func (a *Adapter) refreshHomes(ctx context.Context) {
	if a.homeEvery <= 0 {
		return
	}
	always := func(context.Context) bool { return true }
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.clock.After(a.homeEvery):
		}
		if !a.homeDirty.Swap(false) {
			continue
		}
		now := a.clock.Now()
		var users []string
		a.mu.Lock()
		for u, at := range a.homes {
			if now.Sub(at) > homeKeep {
				delete(a.homes, u)
				continue
			}
			users = append(users, u)
		}
		a.mu.Unlock()
		slices.Sort(users)
		for _, u := range users {
			if ctx.Err() != nil {
				return
			}
			a.publishHome(u, always)
		}
	}
}

// firstTime returns a check of whether key is seen for the first time
// (within the dedupe TTL). The check is made once, on the first call:
// retries of a call ask it again and get the same answer. With no
// Deduper or no key, everything is a first time.
func (a *Adapter) firstTime(key string) func(context.Context) bool {
	checked, first := false, true
	return func(ctx context.Context) bool {
		if checked || key == "" || a.dedupe == nil {
			return first
		}
		checked = true
		seen, err := a.dedupe.Seen(ctx, key, a.dclock.Now(), a.ttl)
		if err != nil {
			// Better to risk a duplicate than to lose the event.
			a.log.Error("checking delivery key", "key", key, "err", err)
		}
		first = !seen
		return first
	}
}

// remember keeps the latest response_url for replies to user in channel.
func (a *Adapter) remember(user, channel, url string) {
	if url == "" || user == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	if len(a.routes) >= 1000 {
		for k, r := range a.routes {
			if now.Sub(r.at) > routeTTL {
				delete(a.routes, k)
			}
		}
	}
	a.routes[user+"\x00"+channel] = &route{url: url, at: now}
}

// cutLog keeps a string from a payload short enough for a log line.
func cutLog(s string) string {
	if len(s) <= 80 {
		return s
	}
	return strings.ToValidUTF8(s[:80], "") + "…"
}
