package slackbot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/bot/slack/blockkit"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

var _ bot.Sender = (*Adapter)(nil)

// Send queues out for delivery and returns at once: the Queue delivers it
// in order with the other replies of its channel, whatever the rate
// limits. It never fails.
func (a *Adapter) Send(ctx context.Context, out commands.Output) error {
	lane := a.send(ctx, out)
	if out.Seq != 0 && a.outbox != nil {
		seq := out.Seq
		if lane == "" {
			return a.outbox.Delivered(ctx, seq) // nothing to send
		}
		// After the output's calls, in their lane: it is delivered.
		a.q.Enqueue(Call{Lane: lane, Method: "outbox", Do: func(ctx context.Context) error {
			if err := a.outbox.Delivered(ctx, seq); err != nil {
				a.log.Error("removing a delivered reply from the outbox; it may be sent again after a restart", "seq", seq, "err", err)
			}
			return nil
		}})
	}
	return nil
}

// send queues out's Web API calls and returns their lane ("" if none).
func (a *Adapter) send(ctx context.Context, out commands.Output) string {
	a.homeDirty.Store(true)
	var lane string
	k := kept{seq: out.Seq, replayed: out.Replayed}
	msg := blockkit.Message(out.Reply)
	to := out.To
	switch to.Kind {
	case commands.ToSender:
		user, channel := to.User, to.Channel
		lane = "user:" + user
		a.q.Enqueue(Call{Lane: lane, Method: "chat.postEphemeral", Do: func(ctx context.Context) error {
			return a.private(ctx, user, channel, msg)
		}})
		// Files cannot be ephemeral: a private reply's image goes to the
		// person's DM.
		a.image(lane, out.Reply.Image, func(ctx context.Context) (string, string, bool) {
			ch, err := a.dmChannel(ctx, user)
			return ch, "", err == nil
		})
	case commands.ToPost:
		lane = "ch:" + to.Channel
		channel := to.Channel
		p := &posted{}
		a.q.Enqueue(Call{Lane: lane, Method: "chat.postMessage", Paced: true, Do: func(ctx context.Context) error {
			ch, ts, err := a.post(ctx, channel, "", msg, k)
			if err == nil {
				p.set(ch, ts)
			}
			return err
		}})
		a.overflow(lane, msg, p.get)
		a.image(lane, out.Reply.Image, p.get)
	case commands.ToChannel:
		lane = "ch:" + to.Channel
		a.mu.Lock()
		a.lanes[to.Request] = lane
		a.mu.Unlock()
		req, channel := to.Request, to.Channel
		a.q.Enqueue(Call{Lane: lane, Method: "chat.postMessage", Paced: true, Do: func(ctx context.Context) error {
			return a.card(ctx, req, channel, msg, k)
		}})
		a.overflow(lane, msg, func(ctx context.Context) (string, string, bool) {
			t, ok := a.thread(ctx, req)
			return t.Channel, t.TS, ok
		})
	case commands.ToThread:
		req := to.Request
		lane = a.laneOf(ctx, req)
		a.q.Enqueue(a.onCard(lane, req, "chat.postMessage", true, func(ctx context.Context, t records.Thread) error {
			_, _, err := a.post(ctx, t.Channel, t.TS, msg, k)
			return err
		}))
		a.overflow(lane, msg, func(ctx context.Context) (string, string, bool) {
			t, ok := a.thread(ctx, req)
			return t.Channel, t.TS, ok
		})
	case commands.UpdateCard:
		req := to.Request
		lane = a.laneOf(ctx, req)
		c := a.onCard(lane, req, "chat.update", false, func(ctx context.Context, t records.Thread) error {
			_, _, _, err := a.api.UpdateMessageContext(ctx, t.Channel, t.TS, slack.MsgOptionText(msg.Text, false), slack.MsgOptionBlocks(msg.Blocks...))
			return err
		})
		c.Supersedes = "card:" + req // only the newest version of a card matters
		a.q.Enqueue(c)
	case commands.ToPerson:
		user, person := to.ChatID, to.Person
		if user == "" && a.dir == nil {
			a.log.Warn("cannot message a person without a Slack user ID", "person", person, "text", msg.Text)
			return ""
		}
		lane = "dm:" + user
		if user == "" {
			lane = "dm:person:" + person
		}
		// who is the Slack user to write to; a person without a slackID
		// is looked up by e-mail (when the Directory is on).
		who := func(ctx context.Context) string {
			if user != "" {
				return user
			}
			return a.dir.id(ctx, person)
		}
		a.q.Enqueue(Call{Lane: lane, Method: "chat.postMessage", Paced: true, Do: func(ctx context.Context) error {
			u := who(ctx)
			if u == "" {
				a.log.Warn("cannot message a person with no Slack user ID or e-mail known to Slack", "person", person, "text", msg.Text)
				return nil
			}
			return a.dmKept(ctx, u, msg, k)
		}})
		a.overflow(lane, msg, func(ctx context.Context) (string, string, bool) {
			u := who(ctx)
			if u == "" {
				return "", "", false
			}
			ch, err := a.dmChannel(ctx, u)
			return ch, "", err == nil
		})
	default:
		a.log.Error("reply with an unknown destination", "kind", string(to.Kind))
	}
	return lane
}

// posted is where a message went, once it is posted: for the calls
// queued after it in its lane.
type posted struct {
	mu      sync.Mutex
	ch, ts  string
	present bool
}

func (p *posted) set(ch, ts string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ch, p.ts, p.present = ch, ts, true
}

func (p *posted) get(context.Context) (string, string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch, p.ts, p.present
}

// maxAltText is how much of an image's text goes into the upload's
// alt_txt (Slack's limit is 1000 characters).
const maxAltText = 1000

// image queues the upload of img (if any) after the message in lane,
// with the files upload flow (files.getUploadURLExternal, the upload,
// files.completeUploadExternal), into the conversation where says the
// message went to (beside it, not in its thread). If Slack refuses the upload (a missing files:write
// scope, a channel the bot is not in), the operator log says why and the
// image's text is posted instead, in the message's thread when there is
// one. Rate limits and transient failures are retried as for any call.
func (a *Adapter) image(lane string, img *commands.Image, where func(context.Context) (channel, ts string, ok bool)) {
	if img == nil || len(img.PNG) == 0 {
		return
	}
	a.q.Enqueue(Call{Lane: lane, Method: "files.completeUploadExternal", Do: func(ctx context.Context) error {
		ch, ts, ok := where(ctx)
		if !ok {
			a.log.Warn("the message of an image was not posted; the image is dropped", "image", img.Name)
			return nil
		}
		alt := img.Alt
		if r := []rune(alt); len(r) > maxAltText {
			alt = string(r[:maxAltText-1]) + "…"
		}
		_, err := a.api.UploadFileContext(ctx, slack.UploadFileParameters{
			Reader: bytes.NewReader(img.PNG), FileSize: len(img.PNG), Filename: img.Name, Title: img.Title, AltTxt: alt, Channel: ch,
		})
		if err == nil {
			return nil
		}
		if _, limited := errors.AsType[*slack.RateLimitedError](err); limited || transient(err) {
			return err
		}
		a.log.Warn("Slack refused the upload of a chart; posting its text instead", "image", img.Name, "channel", ch, "err", a.scrub(err.Error()))
		text := blockkit.Message(commands.Reply{
			Text:   "The chart could not be attached here. What it shows:",
			Blocks: []commands.Block{{Kind: commands.BlockCode, Text: img.Alt}},
		})
		opts := []slack.MsgOption{slack.MsgOptionText(text.Text, false), slack.MsgOptionBlocks(text.Blocks...)}
		if ts != "" {
			opts = append(opts, slack.MsgOptionTS(ts))
		}
		_, _, err = a.api.PostMessageContext(ctx, ch, opts...)
		return err
	}})
}

// card posts a request's card and remembers where it is, in the store
// too, so that the thread survives a restart. A card already posted (sent
// again from the outbox after a crash lost the confirmation) is updated
// instead: a card is never posted twice.
func (a *Adapter) card(ctx context.Context, req, channel string, msg blockkit.Rendered, k kept) error {
	if t, ok := a.thread(ctx, req); ok {
		_, _, _, err := a.api.UpdateMessageContext(ctx, t.Channel, t.TS, slack.MsgOptionText(msg.Text, false), slack.MsgOptionBlocks(msg.Blocks...))
		return err
	}
	ch, ts, err := a.post(ctx, channel, "", msg, k)
	if err != nil {
		return err
	}
	t := records.Thread{Channel: ch, TS: ts}
	a.mu.Lock()
	a.cards[req] = t
	a.mu.Unlock()
	if err := a.threads.PutThread(ctx, req, t); err != nil {
		a.log.Error("saving where a card is; its thread is lost on restart", "request", req, "err", err)
	}
	return nil
}

// onCard is a call about request req's card, made once the card is
// posted. If, when its turn comes, the card is not posted but is now
// queued in another lane (its thread update overtook it between two
// workers), the call moves behind it; with no card at all (seeded work),
// it is skipped.
func (a *Adapter) onCard(lane, req, method string, paced bool, fn func(context.Context, records.Thread) error) Call {
	c := Call{Lane: lane, Method: method, Paced: paced}
	cur := lane
	c.Do = func(ctx context.Context) error {
		t, ok := a.thread(ctx, req)
		if ok {
			return fn(ctx, t)
		}
		a.mu.Lock()
		now := a.lanes[req]
		a.mu.Unlock()
		if now != "" && now != cur {
			cur = now
			moved := c
			moved.Lane = now
			a.q.Enqueue(moved)
			return nil
		}
		a.log.Debug("no card for the request; update skipped", "request", req, "method", method)
		return nil
	}
	return c
}

// thread returns where request req's card is.
func (a *Adapter) thread(ctx context.Context, req string) (records.Thread, bool) {
	a.mu.Lock()
	t, ok := a.cards[req]
	a.mu.Unlock()
	if ok {
		return t, true
	}
	t, err := a.threads.GetThread(ctx, req)
	if err != nil || t.TS == "" {
		return records.Thread{}, false
	}
	a.mu.Lock()
	a.cards[req] = t
	a.mu.Unlock()
	return t, true
}

// laneOf is the lane of request req's card: the lane it was posted in by
// this process, else its channel.
func (a *Adapter) laneOf(ctx context.Context, req string) string {
	a.mu.Lock()
	lane, ok := a.lanes[req]
	a.mu.Unlock()
	if ok {
		return lane
	}
	if t, ok := a.thread(ctx, req); ok {
		lane = "ch:" + t.Channel
	} else {
		lane = "req:" + req
	}
	a.mu.Lock()
	a.lanes[req] = lane
	a.mu.Unlock()
	return lane
}

// private shows msg to user only: through the latest response_url Slack
// gave for user in channel, else chat.postEphemeral, else (no channel,
// or gpubot is not in it) a DM.
func (a *Adapter) private(ctx context.Context, user, channel string, msg blockkit.Rendered) error {
	if msg.Overflow != nil {
		// Files cannot be ephemeral: the whole text goes to the DM.
		if err := a.dmFile(ctx, user, msg.Overflow); err != nil {
			a.log.Warn("uploading a long reply", "user", user, "err", a.scrub(err.Error()))
		}
	}
	if channel == "" {
		return a.dm(ctx, user, msg)
	}
	if url, ok := a.route(user, channel); ok {
		err := slack.PostWebhookCustomHTTPContext(ctx, url, a.httpc, &slack.WebhookMessage{
			Text: msg.Text, Blocks: &slack.Blocks{BlockSet: msg.Blocks}, ResponseType: slack.ResponseTypeEphemeral,
		})
		if err == nil {
			return nil
		}
		if _, ok := errors.AsType[*slack.RateLimitedError](err); ok {
			return err
		}
		a.log.Info("response_url refused; posting the ephemeral message instead", "user", user, "err", err)
		a.forget(user, channel)
	}
	_, err := a.api.PostEphemeralContext(ctx, channel, user, slack.MsgOptionText(msg.Text, false), slack.MsgOptionBlocks(msg.Blocks...))
	switch slackCode(err) {
	case "channel_not_found", "not_in_channel", "user_not_in_channel", "is_archived", "restricted_action":
		return a.dm(ctx, user, msg)
	}
	return err
}

// routeTTL is how long gpubot uses a response_url: Slack accepts one for
// 30 minutes; the margin covers a slow queue.
const routeTTL = 25 * time.Minute

// route reserves one use of the response_url for user in channel.
func (a *Adapter) route(user, channel string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.routes[user+"\x00"+channel]
	if !ok || r.uses >= 5 || a.clock.Since(r.at) > routeTTL {
		return "", false
	}
	r.uses++
	return r.url, true
}

func (a *Adapter) forget(user, channel string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.routes, user+"\x00"+channel)
}

// dm posts msg in the bot's direct conversation with user.
func (a *Adapter) dm(ctx context.Context, user string, msg blockkit.Rendered) error {
	return a.dmKept(ctx, user, msg, kept{})
}

// dmKept is dm for a kept output.
func (a *Adapter) dmKept(ctx context.Context, user string, msg blockkit.Rendered, k kept) error {
	ch, err := a.dmChannel(ctx, user)
	if err != nil {
		return err
	}
	_, _, err = a.post(ctx, ch, "", msg, k)
	return err
}

// kept says whether a message is a kept output (its outbox Seq) and
// whether it is sent again from the outbox after a restart.
type kept struct {
	seq      uint64
	replayed bool
}

// outboxEvent is the metadata event type that marks the posts of kept
// outputs with their outbox Seq.
const outboxEvent = "gpubot_outbox"

// post posts msg in channel (in thread, if set). A kept output's post
// carries its Seq as message metadata; one sent again after a restart is
// first looked for among the channel's (or thread's) latest messages, and
// not posted twice if Slack has it already: a crash may have come
// between Slack taking it and the outbox being told.
func (a *Adapter) post(ctx context.Context, channel, thread string, msg blockkit.Rendered, k kept) (string, string, error) {
	if k.replayed && k.seq != 0 {
		if ts, ok := a.alreadyPosted(ctx, channel, thread, k.seq); ok {
			a.log.Info("a message sent again after a restart was in Slack already; not posted twice", "seq", k.seq, "channel", channel)
			return channel, ts, nil
		}
	}
	opts := []slack.MsgOption{slack.MsgOptionText(msg.Text, false), slack.MsgOptionBlocks(msg.Blocks...)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	if k.seq != 0 {
		opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{EventType: outboxEvent, EventPayload: map[string]any{"seq": strconv.FormatUint(k.seq, 10)}}))
	}
	ch, ts, err := a.api.PostMessageContext(ctx, channel, opts...)
	if err == nil && strings.HasPrefix(channel, "#") && ch != "" {
		a.rememberChannel(ctx, channel, ch)
	}
	return ch, ts, err
}

// channelKey is where the ID of a channel configured by name is kept in
// the thread store (beside the requests' cards), so that after a restart
// its history can be read (conversations.history takes IDs only).
func channelKey(name string) string { return "channel:" + name }

// rememberChannel keeps the ID Slack answered for channel name.
func (a *Adapter) rememberChannel(ctx context.Context, name, id string) {
	a.mu.Lock()
	known := a.chanIDs[name] == id
	a.chanIDs[name] = id
	a.mu.Unlock()
	if known {
		return
	}
	if err := a.threads.PutThread(ctx, channelKey(name), records.Thread{Channel: id}); err != nil {
		a.log.Warn("keeping a channel's ID", "channel", name, "err", err)
	}
}

// channelID is channel's ID: channel itself, or the one remembered for
// a name ("" when unknown).
func (a *Adapter) channelID(ctx context.Context, channel string) string {
	if !strings.HasPrefix(channel, "#") {
		return channel
	}
	a.mu.Lock()
	id := a.chanIDs[channel]
	a.mu.Unlock()
	if id != "" {
		return id
	}
	if t, err := a.threads.GetThread(ctx, channelKey(channel)); err == nil && t.Channel != "" {
		a.mu.Lock()
		a.chanIDs[channel] = t.Channel
		a.mu.Unlock()
		return t.Channel
	}
	return ""
}

// alreadyPosted looks for the post of kept output seq among the latest
// 200 messages of channel (or of the thread), and returns its ts. When
// Slack does not let it look (a channel name where an ID is needed, a
// missing history scope), it says no: the message is posted, at worst
// twice.
func (a *Adapter) alreadyPosted(ctx context.Context, channel, thread string, seq uint64) (string, bool) {
	var msgs []slack.Message
	var err error
	if channel = a.channelID(ctx, channel); channel == "" {
		return "", false // never posted there by name: not posted yet
	}
	if thread == "" {
		var resp *slack.GetConversationHistoryResponse
		resp, err = a.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel, Limit: 200, IncludeAllMetadata: true})
		if err == nil {
			msgs = resp.Messages
		}
	} else {
		msgs, _, _, err = a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: thread, Limit: 200, IncludeAllMetadata: true})
	}
	if err != nil {
		a.log.Warn("cannot tell whether a message sent again after a restart is in Slack already; posting it", "seq", seq, "channel", channel, "err", a.scrub(err.Error()))
		return "", false
	}
	want := strconv.FormatUint(seq, 10)
	for _, m := range msgs {
		if m.Metadata.EventType == outboxEvent && fmt.Sprint(m.Metadata.EventPayload["seq"]) == want {
			return m.Timestamp, true
		}
	}
	return "", false
}

func (a *Adapter) dmChannel(ctx context.Context, user string) (string, error) {
	a.mu.Lock()
	ch, ok := a.dms[user]
	a.mu.Unlock()
	if ok {
		return ch, nil
	}
	c, _, _, err := a.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.dms[user] = c.ID
	a.mu.Unlock()
	return c.ID, nil
}

func (a *Adapter) dmFile(ctx context.Context, user string, o *blockkit.Overflow) error {
	ch, err := a.dmChannel(ctx, user)
	if err != nil {
		return err
	}
	return a.upload(ctx, ch, "", o)
}

// overflow queues the upload of msg's whole text, if it was cut, after
// the message in lane; where says where the message went.
func (a *Adapter) overflow(lane string, msg blockkit.Rendered, where func(context.Context) (channel, ts string, ok bool)) {
	o := msg.Overflow
	if o == nil {
		return
	}
	a.q.Enqueue(Call{Lane: lane, Method: "files.completeUploadExternal", Do: func(ctx context.Context) error {
		ch, ts, ok := where(ctx)
		if !ok {
			return nil
		}
		return a.upload(ctx, ch, ts, o)
	}})
}

func (a *Adapter) upload(ctx context.Context, channel, ts string, o *blockkit.Overflow) error {
	content := o.Content
	if content == "" {
		content = "\n"
	}
	_, err := a.api.UploadFileContext(ctx, slack.UploadFileParameters{
		Content: content, FileSize: len(content), Filename: o.Name, Title: o.Title,
		Channel: channel, ThreadTimestamp: ts,
	})
	return err
}

// observing is an http.RoundTripper that reports each Web API call's
// latency by method (the last element of the URL path).
type observing struct {
	next    http.RoundTripper
	observe func(method string, d time.Duration)
}

func (o observing) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := o.next.RoundTrip(r)
	method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if !strings.Contains(method, ".") {
		method = "other" // response_url, upload URL: not Web API methods
	}
	o.observe(method, time.Since(start))
	return resp, err
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}
