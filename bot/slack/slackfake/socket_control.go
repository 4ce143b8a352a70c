package slackfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
)

// What a test does to the Socket Mode side and reads from it:
// redeliveries, disconnects, acks and envelopes, raw frames.

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
