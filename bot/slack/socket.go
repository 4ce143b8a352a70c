package slackbot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// gpubot reads Socket Mode itself instead of through slack-go's
// socketmode client, for two things that client cannot do (slack-go
// v0.35.0): it drops an envelope whose payload does not decode into its
// Go type (payload a string, text an array, an unknown type, a
// view_submission whose callback_id is a number) after handing the raw
// bytes to an error event, so the envelope is never acked and Slack
// shows the person an error and retries; and on a "disconnect" it closes
// the old socket at once, so an envelope Slack sent on it just after is
// lost. Here every frame is decoded field by field (a field of the wrong
// type spoils only itself), every envelope with an ID is acked once, and
// after a disconnect the old socket is read until Slack closes it (at
// most drainFor) while a new one is opened. slack-go still does the Web
// API, including apps.connections.open, and the payload types.

const (
	// drainFor bounds how long a socket Slack asked to leave is read.
	drainFor = time.Minute
	// maxAck is Slack's limit on a Socket Mode response; larger ones are
	// dropped by Slack without a word, so the payload is left out.
	maxAck = 20_000
	// ackTimeout bounds writing one ack.
	ackTimeout = 2 * time.Second
)

// socketConn is one Socket Mode WebSocket.
type socketConn struct {
	id         int
	ws         *websocket.Conn
	wmu        sync.Mutex    // gorilla allows one writer of data frames
	done       chan struct{} // closed when its reader stops
	disconnect chan struct{} // closed when Slack sent "disconnect" on it
	once       sync.Once
	draining   atomic.Bool
	start      time.Time
	timeout    time.Duration // no ping or frame for this long: dead
}

// send writes one text frame.
func (c *socketConn) send(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(ackTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *socketConn) close() { _ = c.ws.Close() }

// frame is what a socket's reader hands the adapter's loop: a message, or
// the end of the socket.
type frame struct {
	conn *socketConn
	data []byte
	err  error // the socket ended
}

// envelope is one Socket Mode message, read field by field.
type envelope struct {
	Type         string
	EnvelopeID   string
	Payload      json.RawMessage
	Accepts      bool
	RetryAttempt int
	Reason       string // disconnect
	// bad lists the fields of the wrong type ("type is a number").
	bad  []string
	conn *socketConn
}

// readEnvelope decodes a frame. Only a frame that is not a JSON object is
// an error; a field of the wrong type is noted in bad and left zero.
func readEnvelope(data []byte) (envelope, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return envelope{}, errors.New("the message is not a JSON object")
	}
	var e envelope
	get := func(key string, into any) {
		raw, ok := fields[key]
		if !ok || string(raw) == "null" {
			return
		}
		if json.Unmarshal(raw, into) != nil {
			e.bad = append(e.bad, fmt.Sprintf("%s is %s", key, jsonKind(raw)))
		}
	}
	get("type", &e.Type)
	get("envelope_id", &e.EnvelopeID)
	get("accepts_response_payload", &e.Accepts)
	get("retry_attempt", &e.RetryAttempt)
	get("reason", &e.Reason)
	e.Payload = fields["payload"]
	return e, nil
}

// jsonKind names the kind of a JSON value: "an object", "a string", …
func jsonKind(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "missing"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// redacted summarises a payload for the operator's log without a single
// value: its top-level keys and the kind of each ("token: a string"), at
// most 24 of them.
func redacted(payload json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil {
		return "payload is " + jsonKind(payload) + fmt.Sprintf(" (%d bytes)", len(payload))
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	more := ""
	if len(keys) > 24 {
		more = fmt.Sprintf(" and %d more keys", len(keys)-24)
		keys = keys[:24]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %s", cutLog(k), jsonKind(fields[k]))
	}
	return fmt.Sprintf("payload of %d bytes {%s%s}", len(payload), strings.Join(parts, ", "), more)
}

// maintain keeps a Socket Mode connection open until ctx ends: it opens
// one, hands its frames to frames, and opens the next when it is lost or
// Slack asks for it (the old one is then read until it closes). A token
// Slack refuses (after the bounded recheck) ends it with the error on
// fatal.
func (a *Adapter) maintain(ctx context.Context, frames chan<- frame, fatal chan<- error, wg *sync.WaitGroup) {
	attempt, connected := 0, false
	for n := 1; ctx.Err() == nil; n++ {
		c, err := a.dial(ctx, n)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if refused(err) {
				// At start a refusal is final; once connected, Slack gets
				// the bounded recheck.
				if connected {
					err = a.recheck(ctx, "SLACK_APP_TOKEN", func(ctx context.Context) error { _, _, err := a.api.StartSocketModeContext(ctx); return err })
				}
				if err != nil {
					fatal <- fmt.Errorf("%w (%s): check that it is an app-level token (xapp-…) with connections:write of this app, and that Socket Mode is on", ErrAppToken, a.scrub(err.Error()))
					return
				}
				continue
			}
			attempt++
			wait := backoff(attempt)
			a.ready.Store(false)
			a.log.Warn("cannot connect to Slack; retrying", "attempt", attempt, "backoff", wait.String(), "err", a.scrub(err.Error()))
			if !sleepCtx(ctx, wait) {
				return
			}
			continue
		}
		connected = true
		a.mu.Lock()
		a.sock = c
		a.mu.Unlock()
		wg.Go(func() { a.read(ctx, c, frames) })
		select {
		case <-ctx.Done():
			c.close()
			return
		case <-c.done:
			if time.Since(c.start) < 2*time.Second {
				attempt++
				if !sleepCtx(ctx, backoff(attempt)) {
					return
				}
			} else {
				attempt = 0
			}
		case <-c.disconnect:
			attempt = 0
			wg.Go(func() {
				t := time.NewTimer(drainFor)
				defer t.Stop()
				select {
				case <-c.done:
				case <-t.C:
					a.log.Info("closing a Slack socket that was asked to close and did not", "conn", c.id)
				case <-ctx.Done():
				}
				c.close()
			})
		}
	}
}

// backoff is the wait before connection attempt n+1: 1 s doubling to 1 min.
func backoff(n int) time.Duration {
	return min(time.Second<<min(n-1, 6), time.Minute)
}

// sleepCtx waits d of real time (the network's) or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// dial asks Slack for a Socket Mode URL (apps.connections.open, with the
// app-level token) and opens the WebSocket.
func (a *Adapter) dial(ctx context.Context, n int) (*socketConn, error) {
	a.log.Debug("connecting to Slack", "conn", n)
	_, url, err := a.api.StartSocketModeContext(ctx)
	if err != nil {
		return nil, err
	}
	d := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.DialContext(ctx, url, http.Header{"Origin": {"https://api.slack.com"}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		// The URL carries a ticket: not in the message.
		return nil, fmt.Errorf("opening the Socket Mode WebSocket: %w", err)
	}
	c := &socketConn{id: n, ws: ws, done: make(chan struct{}), disconnect: make(chan struct{}), start: time.Now()}
	timeout := a.pingTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	_ = ws.SetReadDeadline(time.Now().Add(timeout))
	ws.SetPingHandler(func(data string) error {
		// Slack pings every few seconds; silence for longer than the
		// timeout means the connection is dead.
		_ = ws.SetReadDeadline(time.Now().Add(timeout))
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(ackTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	c.timeout = timeout
	return c, nil
}

// read hands the socket's frames to frames until it ends.
func (a *Adapter) read(ctx context.Context, c *socketConn, frames chan<- frame) {
	defer close(c.done)
	defer c.close()
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			select {
			case frames <- frame{conn: c, err: err}:
			case <-ctx.Done():
			}
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(c.timeout))
		if e, err := readEnvelope(data); err == nil && e.Type == "disconnect" {
			c.draining.Store(true)
			c.once.Do(func() { close(c.disconnect) })
		}
		select {
		case frames <- frame{conn: c, data: data}:
		case <-ctx.Done():
			return
		}
	}
}

// delivery is one envelope being handled, acked at most once.
type delivery struct {
	a     *Adapter
	env   envelope
	once  sync.Once
	acked atomic.Bool
}

// ack acknowledges the envelope, with an optional payload, on the socket
// it came on, or on the newest one if that one is gone. Later calls do
// nothing: Slack wants one ack per envelope.
func (d *delivery) ack(ctx context.Context, payload any) {
	if d.env.EnvelopeID == "" {
		return
	}
	d.once.Do(func() {
		d.acked.Store(true)
		d.a.ackEnvelope(ctx, d.env, payload)
	})
}

func (a *Adapter) ackEnvelope(_ context.Context, env envelope, payload any) {
	msg := map[string]any{"envelope_id": env.EnvelopeID}
	if payload != nil {
		msg["payload"] = payload
	}
	b, err := json.Marshal(msg)
	if err == nil && len(b) >= maxAck {
		a.log.Warn("an ack's payload is over Slack's limit; acking without it", "envelope", env.EnvelopeID, "bytes", len(b))
		b, err = json.Marshal(map[string]any{"envelope_id": env.EnvelopeID})
	}
	if err != nil {
		a.log.Error("encoding an ack", "envelope", env.EnvelopeID, "err", err)
		return
	}
	err = env.conn.send(b)
	if err != nil {
		a.mu.Lock()
		cur := a.sock
		a.mu.Unlock()
		if cur != nil && cur != env.conn {
			err = cur.send(b)
		}
	}
	if err != nil {
		a.log.Warn("acking a Slack envelope", "envelope", env.EnvelopeID, "conn", env.conn.id, "err", err)
	}
}
