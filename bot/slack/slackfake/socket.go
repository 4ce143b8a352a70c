package slackfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
