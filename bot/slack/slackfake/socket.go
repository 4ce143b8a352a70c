package slackfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is one Socket Mode connection.
type wsConn struct {
	id       int
	ws       *websocket.Conn
	wmu      sync.Mutex // serializes data frames (gorilla allows one writer)
	done     chan struct{}
	once     sync.Once
	draining bool // sent a disconnect; gets no new envelopes (guarded by Server.mu)
}

// write sends one text frame.
func (c *wsConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// kill closes the network connection at once, without a close frame.
func (c *wsConn) kill() {
	c.once.Do(func() { close(c.done) })
	_ = c.ws.NetConn().Close()
}

// envelope is an Envelope with what the fake needs to build and answer it.
type envelope struct {
	Envelope
	payload json.RawMessage
	accepts bool   // accepts_response_payload
	kind    string // slash_commands, block_actions, view_submission, app_home_opened
	user    string
	channel string
	viewID  string // view_submission: the submitted view
}

// envelopeWire is an envelope as Slack sends it.
type envelopeWire struct {
	EnvelopeID             string          `json:"envelope_id"`
	Type                   string          `json:"type"`
	Payload                json.RawMessage `json:"payload"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           *int            `json:"retry_attempt,omitempty"`
	RetryReason            *string         `json:"retry_reason,omitempty"`
}

var upgrader = websocket.Upgrader{
	// slack-go sends Origin: https://api.slack.com; Slack accepts any origin.
	CheckOrigin: func(*http.Request) bool { return true },
}

// serveSocket accepts a WebSocket dialed with a URL from apps.connections.open.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	ok := s.tickets[ticket] && !s.closed
	delete(s.tickets, ticket)
	s.mu.Unlock()
	if !ok {
		s.logf("socket: refused a dial with an unknown or used ticket %q", ticket)
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.logf("socket: upgrade: %v", err)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.connSeq++
	c := &wsConn{id: s.connSeq, ws: ws, done: make(chan struct{})}
	live := 1
	for _, o := range s.conns {
		if !o.draining {
			live++
		}
	}
	s.wg.Add(2)
	s.mu.Unlock()

	hello, _ := json.Marshal(map[string]any{
		"type":            "hello",
		"num_connections": live,
		"debug_info": map[string]any{
			"host":                        fmt.Sprintf("applink-fake-%d", c.id),
			"build_number":                1,
			"approximate_connection_time": 18060,
		},
		"connection_info": map[string]any{"app_id": AppID},
	})
	// Register the socket and write hello while holding its write lock: hello
	// is the first frame, and once the client has seen it, Disconnect and
	// deliveries find the socket.
	c.wmu.Lock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.wmu.Unlock()
		c.kill() // Close has already collected the sockets to close
		s.wg.Done()
		s.wg.Done()
		return
	}
	s.conns[c.id] = c
	s.notifyLocked()
	s.mu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, hello); err != nil {
		s.logf("socket %d: writing hello: %v", c.id, err)
	}
	c.wmu.Unlock()
	s.logf("socket %d: connected (%d live)", c.id, live)

	go s.pingLoop(c)
	go s.readLoop(c)
}

// pingLoop sends WebSocket pings, as Slack does, until the socket ends.
func (s *Server) pingLoop(c *wsConn) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.pingInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-c.done:
			return
		case <-t.C:
			if err := c.ws.WriteControl(websocket.PingMessage, fmt.Appendf(nil, "ping-%d", n), time.Now().Add(5*time.Second)); err != nil {
				return
			}
		}
	}
}

// readLoop reads acks until the socket ends, then forgets the connection.
func (s *Server) readLoop(c *wsConn) {
	defer s.wg.Done()
	defer func() {
		c.kill()
		s.mu.Lock()
		delete(s.conns, c.id)
		s.notifyLocked()
		s.mu.Unlock()
		s.logf("socket %d: closed", c.id)
	}()
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var msg struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(data, &msg); err != nil || msg.EnvelopeID == "" {
			s.logf("socket %d: ignored a message that is not an ack: %.200s", c.id, data)
			continue
		}
		s.recordAck(c.id, msg.EnvelopeID, msg.Payload)
	}
}

// recordAck records an ack and applies its payload as Slack would.
func (s *Server) recordAck(conn int, id string, payload json.RawMessage) {
	now := time.Now()
	if len(payload) == 0 || string(payload) == "null" {
		payload = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ack := Ack{EnvelopeID: id, Payload: payload, At: now, Conn: conn}
	env := s.envByID[id]
	if env == nil {
		s.acks = append(s.acks, ack)
		s.notifyLocked()
		s.logf("socket %d: ack for unknown envelope %s", conn, id)
		return
	}
	ack.Latency = now.Sub(env.SentAt)
	s.acks = append(s.acks, ack)
	if !env.Acked {
		env.Acked = true
		env.AckedAt = now
		if ack.Latency > s.cfg.ackDeadline {
			s.logf("envelope %s (%s) acked late: %v", id, env.kind, ack.Latency)
		}
		if payload != nil {
			s.applyAckPayloadLocked(env, payload, now)
		}
	}
	s.notifyLocked()
}

// applyAckPayloadLocked does what Slack does with an ack's payload.
func (s *Server) applyAckPayloadLocked(env *envelope, payload json.RawMessage, now time.Time) {
	switch env.kind {
	case "slash_commands":
		var p struct {
			ResponseType string          `json:"response_type"`
			Text         string          `json:"text"`
			Blocks       json.RawMessage `json:"blocks"`
			ThreadTS     string          `json:"thread_ts"`
		}
		if json.Unmarshal(payload, &p) != nil || (p.Text == "" && len(p.Blocks) == 0) {
			return
		}
		blocks, code, _ := checkMessageBlocks(p.Blocks)
		if code != "" {
			s.logf("slash command ack payload rejected (%s): %.300s", code, payload)
			return
		}
		m := &Message{Channel: env.channel, Text: p.Text, Blocks: blocks, Via: "ack", PostedAt: now, TS: s.nextTSLocked()}
		if p.ResponseType == "in_channel" {
			m.User = BotUserID
			m.ThreadTS = p.ThreadTS
			s.messages = append(s.messages, m)
		} else {
			m.User = env.user
			s.ephemeral = append(s.ephemeral, m)
		}
	case "view_submission":
		var p struct {
			ResponseAction string          `json:"response_action"`
			View           json.RawMessage `json:"view"`
		}
		if json.Unmarshal(payload, &p) != nil {
			return
		}
		switch p.ResponseAction {
		case "update", "push":
			v := View{Method: "response_action." + p.ResponseAction, User: env.user, View: p.View, At: now}
			if _, errMsgs := checkView(p.View, "modal"); len(errMsgs) > 0 {
				v.Error = "invalid_arguments"
				s.logf("view_submission ack %s view rejected: %v", p.ResponseAction, errMsgs)
			} else {
				id := env.viewID
				if p.ResponseAction == "push" || id == "" {
					id = s.nextIDLocked("V")
				}
				v.ID = id
				s.openViews[id] = &openView{id: id, user: env.user, view: p.View, hash: s.nextHashLocked()}
				s.lastModal[env.user] = id
			}
			s.views = append(s.views, v)
		case "errors":
			// The modal stays open with the errors shown.
		default: // "", "clear": the modal closes
			if s.lastModal[env.user] == env.viewID {
				delete(s.lastModal, env.user)
			}
		}
	}
}

// newEnvelopeID returns a random ID shaped like Slack's (a UUID).
func newEnvelopeID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// send registers a new envelope and delivers it; it returns the envelope_id.
func (s *Server) send(env *envelope) string {
	if env.ID == "" {
		env.ID = newEnvelopeID()
	}
	s.mu.Lock()
	s.envelopes = append(s.envelopes, env)
	s.envByID[env.ID] = env
	s.mu.Unlock()
	s.deliver(env, 0, "")
	return env.ID
}

// deliver writes the envelope to one live socket, waiting for one to connect.
func (s *Server) deliver(env *envelope, retryAttempt int, retryReason string) {
	wire := envelopeWire{
		EnvelopeID:             env.ID,
		Type:                   env.Type,
		Payload:                env.payload,
		AcceptsResponsePayload: env.accepts,
	}
	if env.Type == "events_api" || retryAttempt > 0 {
		wire.RetryAttempt, wire.RetryReason = &retryAttempt, &retryReason
	}
	body, _ := json.Marshal(wire)
	deadline := time.Now().Add(s.cfg.deliveryTimeout)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		c := s.pickConnLocked()
		wait := s.changed
		if c != nil {
			env.Body = body
			env.Attempts++
			env.Conn = c.id
			env.SentAt = time.Now()
			env.Delivered = true
			env.Acked = false
			env.AckedAt = time.Time{}
			s.notifyLocked()
		}
		s.mu.Unlock()
		if c != nil {
			if err := c.write(body); err == nil {
				s.watchAck(env, env.Attempts)
				return
			}
			s.logf("envelope %s: write to socket %d failed; trying another", env.ID, c.id)
			c.kill()
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			s.logf("envelope %s (%s): no socket connected within %v; not delivered", env.ID, env.kind, s.cfg.deliveryTimeout)
			return
		}
		t := time.NewTimer(left)
		select {
		case <-wait:
		case <-t.C:
		}
		t.Stop()
	}
}

// watchAck logs when a delivery is not acked within the ack deadline.
func (s *Server) watchAck(env *envelope, attempt int) {
	time.AfterFunc(s.cfg.ackDeadline, func() {
		s.mu.Lock()
		missed := !env.Acked && env.Attempts == attempt
		s.mu.Unlock()
		if missed {
			s.logf("envelope %s (%s) not acked within %v", env.ID, env.kind, s.cfg.ackDeadline)
		}
	})
}

// pickConnLocked chooses a live, non-draining socket, round robin.
func (s *Server) pickConnLocked() *wsConn {
	var best *wsConn
	var first *wsConn
	for _, c := range s.conns {
		if c.draining {
			continue
		}
		if first == nil || c.id < first.id {
			first = c
		}
		if c.id > s.rr && (best == nil || c.id < best.id) {
			best = c
		}
	}
	if best == nil {
		best = first
	}
	if best != nil {
		s.rr = best.id
	}
	return best
}

// Redeliver sends an envelope again on a live socket, with retry_attempt one
// more than before and retry_reason "timeout", as Slack retries an envelope
// that was not acked. The envelope_id is the same.
func (s *Server) Redeliver(envelopeID string) {
	s.mu.Lock()
	env := s.envByID[envelopeID]
	attempt := 0
	if env != nil {
		attempt = env.Attempts
	}
	s.mu.Unlock()
	if env == nil {
		s.logf("Redeliver: unknown envelope %s", envelopeID)
		return
	}
	s.deliver(env, attempt, "timeout")
}

// RedeliverAsNew sends an envelope's payload again under a new envelope_id,
// with retry_attempt and retry_reason "timeout" set, and returns the new ID.
// Slack has been seen retrying both ways, so a bot should deduplicate on the
// payload (event_id, trigger_id, action_ts), not only on envelope_id.
func (s *Server) RedeliverAsNew(envelopeID string) string {
	s.mu.Lock()
	old := s.envByID[envelopeID]
	if old == nil {
		s.mu.Unlock()
		s.logf("RedeliverAsNew: unknown envelope %s", envelopeID)
		return ""
	}
	env := &envelope{
		Envelope: Envelope{ID: newEnvelopeID(), Type: old.Type},
		payload:  old.payload, accepts: old.accepts, kind: old.kind,
		user: old.user, channel: old.channel, viewID: old.viewID,
	}
	attempt := old.Attempts
	s.envelopes = append(s.envelopes, env)
	s.envByID[env.ID] = env
	s.mu.Unlock()
	s.deliver(env, max(attempt, 1), "timeout")
	return env.ID
}

// Disconnect sends {"type":"disconnect","reason":reason} on every live socket
// (reasons Slack uses: "refresh_requested", "warning", "too_many_websockets"),
// stops delivering envelopes to them, and closes each (a close frame, then
// the connection) once a newer socket has connected, or after 10 s.
func (s *Server) Disconnect(reason string) {
	s.mu.Lock()
	var old []*wsConn
	for _, c := range s.conns {
		if !c.draining {
			old = append(old, c)
		}
	}
	s.mu.Unlock()
	for _, c := range old {
		c.wmu.Lock()
		s.disconnectLocked(reason, c)
		c.wmu.Unlock()
	}
}

// disconnectLocked marks c draining, writes the disconnect message on it
// and has it closed later; the caller holds c.wmu.
func (s *Server) disconnectLocked(reason string, c *wsConn) {
	msg, _ := json.Marshal(map[string]any{
		"type":       "disconnect",
		"reason":     reason,
		"debug_info": map[string]any{"host": "applink-fake"},
	})
	s.mu.Lock()
	if s.closed || c.draining {
		s.mu.Unlock()
		return
	}
	c.draining = true
	s.wg.Add(1)
	s.mu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		s.logf("socket %d: writing disconnect: %v", c.id, err)
	}
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.waitFor(ctx, c.done, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.closed || s.connSeq > c.id && s.liveLocked() > 0
		})
		// As Slack does: a close frame, and the connection goes once the
		// client answers it (or after a second). It waits for the socket's
		// write lock: what was sent on the socket after the disconnect
		// (DisconnectThen's envelopes, which hold the lock) goes out
		// first. gorilla lets a control frame overtake a data frame, and a
		// client that reconnected quickly (a busy machine) made the close
		// frame overtake them, so that they were never sent ("close sent").
		c.wmu.Lock()
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "refresh"), time.Now().Add(time.Second))
		c.wmu.Unlock()
		t := time.NewTimer(time.Second)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		c.kill()
	}()
}

func (s *Server) liveLocked() int {
	n := 0
	for _, c := range s.conns {
		if !c.draining {
			n++
		}
	}
	return n
}

// DropConnections cuts every socket at once, without a close frame, like a
// network failure.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*wsConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
}

// Connections returns the number of live sockets (including ones that were
// sent a disconnect and are not closed yet).
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ConnectCount returns the number of sockets accepted since the start. The
// number of apps.connections.open calls is len(s.Calls("apps.connections.open")).
func (s *Server) ConnectCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connSeq
}

// WaitAck waits for the bot to ack an envelope (its latest delivery) and
// returns the ack.
func (s *Server) WaitAck(ctx context.Context, envelopeID string) (Ack, error) {
	var got Ack
	err := s.WaitFor(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		var since time.Time
		if env := s.envByID[envelopeID]; env != nil {
			since = env.SentAt
		}
		for i := len(s.acks) - 1; i >= 0; i-- {
			if a := s.acks[i]; a.EnvelopeID == envelopeID && !a.At.Before(since) {
				got = a
				return true
			}
		}
		return false
	})
	if err != nil {
		return Ack{}, fmt.Errorf("waiting for the ack of envelope %s: %w", envelopeID, err)
	}
	return got, nil
}

// Acks returns every ack received, in arrival order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Ack, len(s.acks))
	for i, a := range s.acks {
		a.Payload = cloneRaw(a.Payload)
		out[i] = a
	}
	return out
}

// Envelopes returns every envelope created, in order.
func (s *Server) Envelopes() []Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Envelope, len(s.envelopes))
	for i, e := range s.envelopes {
		out[i] = e.Envelope
		out[i].Body = cloneRaw(e.Body)
	}
	return out
}

// Unacked returns the envelopes that missed the ack deadline (3 s by
// default): never delivered, acked late, or still unacked after the deadline.
// An envelope still within its deadline is not reported.
func (s *Server) Unacked() []Envelope {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Envelope
	for _, e := range s.envelopes {
		late := !e.Delivered ||
			e.Acked && e.AckedAt.Sub(e.SentAt) > s.cfg.ackDeadline ||
			!e.Acked && now.Sub(e.SentAt) > s.cfg.ackDeadline
		if late {
			c := e.Envelope
			c.Body = cloneRaw(e.Body)
			out = append(out, c)
		}
	}
	return out
}

// WaitFor waits until cond returns true, re-checking on every change of the
// fake's state (and at least every 50 ms). cond may call the Server's
// accessors. It returns ctx.Err() if ctx ends first.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	return s.waitFor(ctx, nil, cond)
}

var errStopped = errors.New("stopped")

func (s *Server) waitFor(ctx context.Context, stop <-chan struct{}, cond func() bool) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopped
		case <-ch:
		case <-t.C:
		}
	}
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage(nil), r...)
}

// RawEnvelope is an envelope a test puts together itself, for payloads
// Slack should never send and a bot must survive anyway (a payload that
// is a string, a text that is an array, an unknown type, …), or built by
// SlashCommandEnvelope for DisconnectThen.
type RawEnvelope struct {
	// ID is the envelope_id; "" for a new one.
	ID string
	// Type is sent as given: "slash_commands", "interactive", "events_api",
	// or anything at all.
	Type string
	// Payload is sent as is; nil leaves "payload" out.
	Payload                json.RawMessage
	AcceptsResponsePayload bool

	user, channel, kind string // set by SlashCommandEnvelope
}

func (s *Server) rawLocked(e RawEnvelope) *envelope {
	if e.ID == "" {
		e.ID = newEnvelopeID()
	}
	kind := e.kind
	if kind == "" {
		kind = "raw " + e.Type
	}
	env := &envelope{Envelope: Envelope{ID: e.ID, Type: e.Type}, payload: e.Payload, accepts: e.AcceptsResponsePayload, kind: kind, user: e.user, channel: e.channel}
	if _, ok := s.envByID[env.ID]; !ok {
		s.envelopes = append(s.envelopes, env)
	}
	s.envByID[env.ID] = env
	return env
}

// SendRaw delivers e to one live socket, as SlashCommand does, and
// returns its envelope_id. Its ack is recorded like any other.
func (s *Server) SendRaw(e RawEnvelope) string {
	s.mu.Lock()
	env := s.rawLocked(e)
	s.mu.Unlock()
	s.deliver(env, 0, "")
	return env.ID
}

// SendFrame writes data as one text frame to one live socket, as is: for
// messages that are not envelopes at all (not JSON, no envelope_id). It
// reports whether a socket took it.
func (s *Server) SendFrame(data []byte) bool {
	s.mu.Lock()
	c := s.pickConnLocked()
	s.mu.Unlock()
	return c != nil && c.write(data) == nil
}

// DisconnectThen is Disconnect followed, on the same (now old) socket and
// before anything else, by the envelopes then: what a client that closes
// the old socket at once loses. It returns their envelope_ids. With no
// live socket it returns nil.
func (s *Server) DisconnectThen(reason string, then ...RawEnvelope) []string {
	s.mu.Lock()
	var old *wsConn
	for _, c := range s.conns {
		if !c.draining && (old == nil || c.id < old.id) {
			old = c
		}
	}
	if old == nil || s.closed {
		s.mu.Unlock()
		return nil
	}
	envs := make([]*envelope, len(then))
	for i, e := range then {
		envs[i] = s.rawLocked(e)
	}
	s.mu.Unlock()
	// Hold the old socket's write lock from the disconnect message to the
	// last envelope, so that nothing comes between them.
	old.wmu.Lock()
	s.disconnectLocked(reason, old)
	ids := make([]string, len(envs))
	for i, env := range envs {
		body, _ := json.Marshal(envelopeWire{EnvelopeID: env.ID, Type: env.Type, Payload: env.payload, AcceptsResponsePayload: env.accepts})
		s.mu.Lock()
		env.Body, env.Attempts, env.Conn, env.SentAt, env.Delivered = body, env.Attempts+1, old.id, time.Now(), true
		env.Acked, env.AckedAt = false, time.Time{}
		s.notifyLocked()
		s.mu.Unlock()
		_ = old.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := old.ws.WriteMessage(websocket.TextMessage, body); err != nil {
			s.logf("envelope %s: writing to the old socket %d: %v", env.ID, old.id, err)
		}
		s.watchAck(env, env.Attempts)
		ids[i] = env.ID
	}
	old.wmu.Unlock()
	return ids
}
