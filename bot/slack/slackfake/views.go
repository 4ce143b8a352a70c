package slackfake

import (
	"encoding/json"
	"fmt"
	"time"
)

// trigger is a trigger_id handed out in a payload.
type trigger struct {
	user   string
	issued time.Time
}

// openView is a modal or home tab the bot opened or published.
type openView struct {
	id         string
	user       string
	view       json.RawMessage
	hash       string
	externalID string
	home       bool
}

// newTriggerLocked hands out a trigger_id shaped like Slack's.
func (s *Server) newTriggerLocked(user string) string {
	s.seq++
	now := time.Now()
	id := fmt.Sprintf("%d.%d.%s", 1000000000000+s.seq, now.Unix(), newEnvelopeID()[:8])
	s.triggers[id] = trigger{user: user, issued: now}
	return id
}

func (s *Server) nextHashLocked() string {
	s.seq++
	return fmt.Sprintf("%d.%08x", time.Now().Unix(), s.seq)
}

// viewWire is the view object Slack returns from views.*.
func (v *openView) wire() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(v.view, &m)
	if m == nil {
		m = map[string]any{}
	}
	m["id"] = v.id
	m["team_id"] = TeamID
	m["hash"] = v.hash
	m["app_id"] = AppID
	m["bot_id"] = BotID
	m["app_installed_team_id"] = TeamID
	m["root_view_id"] = v.id
	m["previous_view_id"] = nil
	m["external_id"] = v.externalID
	m["state"] = map[string]any{"values": map[string]any{}}
	for _, k := range []string{"private_metadata", "callback_id"} {
		if _, ok := m[k]; !ok {
			m[k] = ""
		}
	}
	for _, k := range []string{"clear_on_close", "notify_on_close"} {
		if _, ok := m[k]; !ok {
			m[k] = false
		}
	}
	return m
}

// recordViewLocked appends a View for a views.* call.
func (s *Server) recordViewLocked(v View) {
	v.At = time.Now()
	s.views = append(s.views, v)
	s.notifyLocked()
}

// openModal is views.open and views.push.
func (s *Server) openModal(r *request) (map[string]any, *apiError) {
	raw := r.raw("view")
	tid := r.str("trigger_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := View{Method: r.method, TriggerID: tid, View: cloneRaw(raw), ExternalID: externalID(raw)}
	t, ok := s.triggers[tid]
	rec.User = t.user
	var e *apiError
	switch {
	case tid == "":
		e = fail("invalid_arguments", "[ERROR] missing required field: trigger_id")
	case !ok:
		e = fail("invalid_trigger_id")
	case time.Since(t.issued) > s.cfg.triggerTTL:
		e = fail("expired_trigger_id")
	}
	if e == nil {
		if _, msgs := checkView(raw, "modal"); len(msgs) > 0 {
			e = fail("invalid_arguments", msgs...)
		}
	}
	if e == nil && rec.ExternalID != "" {
		for _, v := range s.openViews {
			if v.externalID == rec.ExternalID {
				e = fail("duplicate_external_id")
			}
		}
	}
	if e != nil {
		rec.Error = e.code
		s.recordViewLocked(rec)
		return nil, e
	}
	v := &openView{id: s.nextIDLocked("V"), user: t.user, view: cloneRaw(raw), hash: s.nextHashLocked(), externalID: rec.ExternalID}
	s.openViews[v.id] = v
	s.lastModal[t.user] = v.id
	rec.ID, rec.Hash = v.id, v.hash
	s.recordViewLocked(rec)
	return map[string]any{"view": v.wire()}, nil
}

func (s *Server) viewsOpen(r *request) (map[string]any, *apiError) { return s.openModal(r) }
func (s *Server) viewsPush(r *request) (map[string]any, *apiError) { return s.openModal(r) }

func externalID(raw json.RawMessage) string {
	var v struct {
		ExternalID string `json:"external_id"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.ExternalID
}

func (s *Server) viewsUpdate(r *request) (map[string]any, *apiError) {
	raw := r.raw("view")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := View{Method: r.method, View: cloneRaw(raw), ExternalID: r.str("external_id"), Hash: r.str("hash")}
	var v *openView
	if id := r.str("view_id"); id != "" {
		v = s.openViews[id]
	} else if rec.ExternalID != "" {
		for _, o := range s.openViews {
			if o.externalID == rec.ExternalID {
				v = o
			}
		}
	}
	var e *apiError
	switch {
	case r.str("view_id") == "" && rec.ExternalID == "":
		e = fail("invalid_arguments", "[ERROR] view_id or external_id is required")
	case v == nil:
		e = fail("not_found")
	case rec.Hash != "" && rec.Hash != v.hash:
		e = fail("hash_conflict")
	}
	if e == nil {
		want := "modal"
		if v.home {
			want = "home"
		}
		if _, msgs := checkView(raw, want); len(msgs) > 0 {
			e = fail("invalid_arguments", msgs...)
		}
	}
	if e != nil {
		rec.Error = e.code
		s.recordViewLocked(rec)
		return nil, e
	}
	v.view, v.hash = cloneRaw(raw), s.nextHashLocked()
	if ext := externalID(raw); ext != "" {
		v.externalID = ext
	}
	rec.ID, rec.User = v.id, v.user
	s.recordViewLocked(rec)
	return map[string]any{"view": v.wire()}, nil
}

func (s *Server) viewsPublish(r *request) (map[string]any, *apiError) {
	raw := r.raw("view")
	user := r.str("user_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := View{Method: r.method, User: user, View: cloneRaw(raw), Hash: r.str("hash")}
	var e *apiError
	var home *openView
	for _, v := range s.openViews {
		if v.home && v.user == user {
			home = v
		}
	}
	switch {
	case user == "":
		e = fail("invalid_arguments", "[ERROR] missing required field: user_id")
	case s.users[user].ID == "":
		e = fail("user_not_found")
	case rec.Hash != "" && home != nil && rec.Hash != home.hash:
		e = fail("hash_conflict")
	}
	if e == nil {
		if _, msgs := checkView(raw, "home"); len(msgs) > 0 {
			e = fail("invalid_arguments", msgs...)
		}
	}
	if e != nil {
		rec.Error = e.code
		s.recordViewLocked(rec)
		return nil, e
	}
	if home == nil {
		home = &openView{id: s.nextIDLocked("V"), user: user, home: true}
		s.openViews[home.id] = home
	}
	home.view, home.hash, home.externalID = cloneRaw(raw), s.nextHashLocked(), externalID(raw)
	rec.ID = home.id
	s.recordViewLocked(rec)
	return map[string]any{"view": home.wire()}, nil
}

// Views returns every views.* call (and view_submission ack response_action),
// successful or not, in order.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]View, len(s.views))
	for i, v := range s.views {
		v.View = cloneRaw(v.View)
		out[i] = v
	}
	return out
}

// HomeView returns the App Home view last published for a user, or nil.
func (s *Server) HomeView(user string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.openViews {
		if v.home && v.user == user {
			return cloneRaw(v.view)
		}
	}
	return nil
}
