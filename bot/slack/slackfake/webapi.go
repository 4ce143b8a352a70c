package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// apiError is a Slack error answer: {"ok":false,"error":code} with optional
// response_metadata.messages.
type apiError struct {
	code     string
	messages []string
}

func fail(code string, messages ...string) *apiError {
	return &apiError{code: code, messages: messages}
}

// handler answers one Web API method.
type handler func(s *Server, r *request) (map[string]any, *apiError)

type tokenKind int

const (
	botTokenOnly tokenKind = iota
	appTokenOnly
)

type method struct {
	token tokenKind
	h     handler
}

// methods is the Web API the fake implements.
var methods = map[string]method{
	"auth.test":                    {botTokenOnly, (*Server).authTest},
	"apps.connections.open":        {appTokenOnly, (*Server).appsConnectionsOpen},
	"chat.postMessage":             {botTokenOnly, (*Server).chatPostMessage},
	"chat.update":                  {botTokenOnly, (*Server).chatUpdate},
	"chat.delete":                  {botTokenOnly, (*Server).chatDelete},
	"chat.postEphemeral":           {botTokenOnly, (*Server).chatPostEphemeral},
	"chat.getPermalink":            {botTokenOnly, (*Server).chatGetPermalink},
	"conversations.open":           {botTokenOnly, (*Server).conversationsOpen},
	"conversations.history":        {botTokenOnly, (*Server).conversationsHistory},
	"conversations.replies":        {botTokenOnly, (*Server).conversationsReplies},
	"users.info":                   {botTokenOnly, (*Server).usersInfo},
	"users.lookupByEmail":          {botTokenOnly, (*Server).usersLookupByEmail},
	"views.open":                   {botTokenOnly, (*Server).viewsOpen},
	"views.push":                   {botTokenOnly, (*Server).viewsPush},
	"views.update":                 {botTokenOnly, (*Server).viewsUpdate},
	"views.publish":                {botTokenOnly, (*Server).viewsPublish},
	"files.getUploadURLExternal":   {botTokenOnly, (*Server).filesGetUploadURLExternal},
	"files.completeUploadExternal": {botTokenOnly, (*Server).filesCompleteUploadExternal},
}

// request is a parsed Web API call: form (and query) parameters, or a JSON
// object body.
type request struct {
	method string
	token  string
	form   url.Values
	json   map[string]json.RawMessage
}

// str returns a parameter as text: the form value, or a JSON string, number
// or boolean.
func (r *request) str(key string) string {
	if v, ok := r.json[key]; ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		t := strings.TrimSpace(string(v))
		if t == "null" {
			return ""
		}
		return t
	}
	return r.form.Get(key)
}

// has reports whether a parameter is present.
func (r *request) has(key string) bool {
	if _, ok := r.json[key]; ok {
		return true
	}
	_, ok := r.form[key]
	return ok
}

// raw returns a parameter that holds JSON (blocks, view, files): the form value
// as JSON text, a JSON value, or a JSON string holding JSON text.
func (r *request) raw(key string) json.RawMessage {
	if v, ok := r.json[key]; ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return json.RawMessage(s)
		}
		return v
	}
	if v, ok := r.form[key]; ok && len(v) > 0 {
		return json.RawMessage(v[0])
	}
	return nil
}

// bool returns a boolean parameter ("true", "1", true).
func (r *request) bool(key string) bool {
	b, _ := strconv.ParseBool(r.str(key))
	return b
}

// fault is one injected failure.
type fault struct {
	status     int           // HTTP status; 429 adds Retry-After
	retryAfter time.Duration // for 429
	code       string        // Slack error for ok:false answers
}

// RateLimit makes the next n calls of method (e.g. "chat.postMessage", or
// "response_url") answer HTTP 429 with a Retry-After header, in whole seconds
// rounded up, as Slack sends it; slack-go returns *slack.RateLimitedError.
func (s *Server) RateLimit(method string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[method] = append(s.faults[method], fault{status: http.StatusTooManyRequests, retryAfter: retryAfter})
	}
}

// FailNext makes the next call of method answer {"ok":false,"error":errCode}
// (HTTP 200). Calls queue: FailNext twice fails the next two calls.
func (s *Server) FailNext(method, errCode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], fault{code: errCode})
}

// FailNextStatus makes the next call of method answer an HTTP status (e.g.
// 500 or 503) with an HTML body, as Slack's front end does.
func (s *Server) FailNextStatus(method string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], fault{status: status})
}

// takeFaultLocked pops the next injected fault of a method.
func (s *Server) takeFaultLocked(method string) (fault, bool) {
	q := s.faults[method]
	if len(q) == 0 {
		return fault{}, false
	}
	f := q[0]
	if len(q) == 1 {
		delete(s.faults, method)
	} else {
		s.faults[method] = q[1:]
	}
	return f, true
}

// writeFault answers an injected fault; it returns the status and error.
func writeFault(w http.ResponseWriter, f fault) (int, string) {
	switch {
	case f.status == http.StatusTooManyRequests:
		secs := int(math.Ceil(f.retryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return f.status, "ratelimited"
	case f.status != 0:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, "<html><body>%d %s</body></html>", f.status, http.StatusText(f.status))
		return f.status, ""
	default:
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": f.code})
		return http.StatusOK, f.code
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"ok":false,"error":"internal_error"}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

const maxBody = 8 << 20

// serveAPI answers https://slack.com/api/<method>.
func (s *Server) serveAPI(w http.ResponseWriter, hr *http.Request) {
	name := strings.TrimPrefix(hr.URL.Path, "/api/")
	call := Call{Method: name, HTTPMethod: hr.Method, ContentType: hr.Header.Get("Content-Type"), At: time.Now()}
	r := &request{method: name, form: url.Values{}}
	maps.Copy(r.form, hr.URL.Query())

	body, err := io.ReadAll(io.LimitReader(hr.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "error": "invalid_request"})
		return
	}
	mediaType, _, _ := mime.ParseMediaType(call.ContentType)
	badBody := false
	switch {
	case mediaType == "application/json":
		call.JSON = body
		if len(strings.TrimSpace(string(body))) > 0 {
			if json.Unmarshal(body, &r.json) != nil {
				badBody = true
			}
		}
	case len(body) > 0:
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			badBody = true
		}
		for k, v := range vals {
			r.form[k] = append(r.form[k], v...)
		}
	}

	// The token: Authorization: Bearer, else token= in the body or query.
	if a := hr.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		r.token = strings.TrimSpace(strings.TrimPrefix(a, "Bearer "))
	} else {
		r.token = r.str("token")
	}
	call.Token = r.token
	params := maps.Clone(r.form)
	params.Del("token")
	call.Params = params

	status, code, msgs := s.answer(w, r, name, badBody)
	call.Status, call.Error = status, code
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.notifyLocked()
	s.mu.Unlock()
	switch {
	case code == "" || code == "ratelimited":
	case len(msgs) > 0:
		s.logf("%s → %s %v", name, code, msgs)
	default:
		s.logf("%s → %s", name, code)
	}
}

// answer runs the method and writes the answer; it returns the status, the
// Slack error ("" when ok) and the error's messages.
func (s *Server) answer(w http.ResponseWriter, r *request, name string, badBody bool) (int, string, []string) {
	m, known := methods[name]
	if !known {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
		return http.StatusOK, "unknown_method", nil
	}
	refusal := checkToken(r.token, m.token)
	s.mu.Lock()
	if refusal == "" && s.revoked[r.token] {
		refusal = "token_revoked"
	}
	s.mu.Unlock()
	if refusal != "" {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": refusal})
		return http.StatusOK, refusal, nil
	}
	s.mu.Lock()
	f, faulty := s.takeFaultLocked(name)
	s.mu.Unlock()
	if faulty {
		st, code := writeFault(w, f)
		return st, code, nil
	}
	if badBody {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_json"})
		return http.StatusOK, "invalid_json", nil
	}
	out, e := m.h(s, r)
	if e != nil {
		resp := map[string]any{"ok": false, "error": e.code}
		if len(e.messages) > 0 {
			resp["response_metadata"] = map[string]any{"messages": e.messages}
		}
		writeJSON(w, http.StatusOK, resp)
		return http.StatusOK, e.code, e.messages
	}
	if out == nil {
		out = map[string]any{}
	}
	out["ok"] = true
	writeJSON(w, http.StatusOK, out)
	return http.StatusOK, "", nil
}

// checkToken returns Slack's error for a token, "" when it may call.
func checkToken(token string, kind tokenKind) string {
	switch {
	case token == "":
		return "not_authed"
	case token != BotToken && token != AppToken:
		return "invalid_auth"
	case kind == appTokenOnly && token != AppToken, kind == botTokenOnly && token != BotToken:
		return "not_allowed_token_type"
	}
	return ""
}

// Revoke makes Slack refuse token (BotToken or AppToken) from now on, as
// when the app is uninstalled or the token is revoked: every Web API call
// with it answers token_revoked. Restore takes it back.
func (s *Server) Revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[token] = true
}

// Restore makes Slack accept a revoked token again.
func (s *Server) Restore(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.revoked, token)
}

// Calls returns the Web API calls of a method, in order; method "" returns
// every call.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			c.Params = maps.Clone(c.Params)
			c.JSON = cloneRaw(c.JSON)
			out = append(out, c)
		}
	}
	return out
}

func (s *Server) authTest(*request) (map[string]any, *apiError) {
	return map[string]any{
		"url":                   "https://" + TeamDomain + ".slack.com/",
		"team":                  TeamDomain,
		"user":                  BotName,
		"team_id":               TeamID,
		"user_id":               BotUserID,
		"bot_id":                BotID,
		"is_enterprise_install": false,
	}, nil
}

func (s *Server) appsConnectionsOpen(*request) (map[string]any, *apiError) {
	ticket := newEnvelopeID()
	s.mu.Lock()
	s.tickets[ticket] = true
	s.mu.Unlock()
	u := "ws" + strings.TrimPrefix(s.http.URL, "http") + "/link/?ticket=" + ticket + "&app_id=" + AppID
	return map[string]any{"url": u}, nil
}
