package slackfake

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// Slack's response_url limits.
const (
	responseURLUses = 5
	responseURLTTL  = 30 * time.Minute
)

// responseURL is a response_url handed out in a payload.
type responseURL struct {
	url        string
	envelopeID string
	kind       string
	user       string
	channel    string
	messageTS  string // block_actions: the message with the button
	issued     time.Time
	uses       int
}

// newResponseURLLocked hands out a response_url for an interaction.
func (s *Server) newResponseURLLocked(kind, user, channel, messageTS string) *responseURL {
	id := s.nextIDLocked("R")
	ru := &responseURL{
		url:  s.http.URL + "/response/" + TeamID + "/" + id + "/" + newEnvelopeID()[:12],
		kind: kind, user: user, channel: channel, messageTS: messageTS, issued: time.Now(),
	}
	s.responses[ru.url] = ru
	return ru
}

// serveResponseURL receives a POST to a response_url. Success is HTTP 200
// {"ok":true}; errors follow Slack's incoming-webhook convention, an HTTP 4xx
// status with the error code as a text/plain body (404 used_url, expired_url,
// no_service; 400 invalid_payload, invalid_blocks, no_text, ...). slack-go
// reports those as slack.StatusCodeError; ResponsePost.Error keeps the code.
func (s *Server) serveResponseURL(w http.ResponseWriter, hr *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(hr.Body, maxBody))
	full := s.http.URL + hr.URL.Path
	now := time.Now()
	var p struct {
		Text            string          `json:"text"`
		Blocks          json.RawMessage `json:"blocks"`
		ResponseType    string          `json:"response_type"`
		ReplaceOriginal bool            `json:"replace_original"`
		DeleteOriginal  bool            `json:"delete_original"`
		ThreadTS        string          `json:"thread_ts"`
	}
	parseErr := json.Unmarshal(body, &p)

	s.mu.Lock()
	defer s.mu.Unlock()
	post := ResponsePost{URL: full, Body: cloneRaw(body), At: now, Text: p.Text, ResponseType: p.ResponseType,
		ReplaceOriginal: p.ReplaceOriginal, DeleteOriginal: p.DeleteOriginal, ThreadTS: p.ThreadTS}
	if post.ResponseType == "" {
		post.ResponseType = "ephemeral"
	}
	answer := func(code string) {
		post.Error = code
		s.posts = append(s.posts, post)
		s.notifyLocked()
		if code == "" {
			writeJSON(w, http.StatusOK, map[string]any{"ok": true})
			return
		}
		s.logf("response_url %s → %s", hr.URL.Path, code)
		writeWebhookError(w, code)
	}
	ru := s.responses[full]
	if ru == nil {
		answer("no_service")
		return
	}
	post.EnvelopeID, post.Kind, post.User, post.Channel, post.MessageTS = ru.envelopeID, ru.kind, ru.user, ru.channel, ru.messageTS
	if f, ok := s.takeFaultLocked("response_url"); ok {
		if f.code != "" {
			answer(f.code)
			return
		}
		_, post.Error = writeFault(w, f)
		s.posts = append(s.posts, post)
		s.notifyLocked()
		return
	}
	switch {
	case hr.Method != http.MethodPost:
		answer("invalid_method")
		return
	case now.Sub(ru.issued) > responseURLTTL:
		answer("expired_url")
		return
	case ru.uses >= responseURLUses:
		answer("used_url")
		return
	case parseErr != nil:
		answer("invalid_payload")
		return
	}
	blocks, code, msgs := checkMessageBlocks(p.Blocks)
	if code != "" {
		s.logf("response_url blocks: %v", msgs)
		answer(code)
		return
	}
	if !hasBlocks(blocks) {
		blocks = nil
	}
	if code := checkText(p.Text, blocks != nil); code != "" && !p.DeleteOriginal {
		answer(code)
		return
	}
	ru.uses++
	post.Blocks = blocks
	s.applyResponseLocked(ru, post, now)
	answer("")
}

// writeWebhookError answers an error as Slack's webhooks do.
func writeWebhookError(w http.ResponseWriter, code string) {
	status := http.StatusBadRequest
	switch code {
	case "used_url", "expired_url", "no_service", "channel_not_found":
		status = http.StatusNotFound
	case "invalid_method":
		status = http.StatusMethodNotAllowed
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, code)
}

// applyResponseLocked does what Slack does with an accepted response_url post.
func (s *Server) applyResponseLocked(ru *responseURL, p ResponsePost, now time.Time) {
	var original *Message
	if ru.messageTS != "" {
		original = s.findLocked(ru.channel, ru.messageTS)
		if original == nil {
			for _, m := range s.ephemeral {
				if m.Channel == ru.channel && m.TS == ru.messageTS && m.User == ru.user {
					original = m
				}
			}
		}
	}
	switch {
	case p.DeleteOriginal:
		if original != nil {
			original.Deleted = true
		}
	case p.ReplaceOriginal && original != nil:
		original.edit(p.Text, p.Blocks, now)
	case p.ResponseType == "in_channel":
		s.messages = append(s.messages, &Message{
			Channel: ru.channel, TS: s.nextTSLocked(), ThreadTS: p.ThreadTS, User: BotUserID,
			Text: p.Text, Blocks: p.Blocks, Via: "response_url", PostedAt: now,
		})
	default:
		s.ephemeral = append(s.ephemeral, &Message{
			Channel: ru.channel, TS: s.nextTSLocked(), User: ru.user,
			Text: p.Text, Blocks: p.Blocks, Via: "response_url", PostedAt: now,
		})
	}
}

// ResponseURLPosts returns every POST to a response_url, accepted or not, in
// order.
func (s *Server) ResponseURLPosts() []ResponsePost {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ResponsePost, len(s.posts))
	for i, p := range s.posts {
		p.Body, p.Blocks = cloneRaw(p.Body), cloneRaw(p.Blocks)
		out[i] = p
	}
	return out
}
