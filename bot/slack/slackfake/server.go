package slackfake

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running fake Slack. All its methods are safe for concurrent use;
// the accessors return copies.
type Server struct {
	cfg  config
	http *httptest.Server
	wg   sync.WaitGroup // socket goroutines

	logMu  sync.RWMutex // held (read) while logging; Close takes it to stop the log
	logOff bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change
	closed  bool
	seq     int   // for IDs
	lastTS  int64 // microseconds of the last message ts handed out
	users   map[string]User

	// Socket Mode
	tickets   map[string]bool // issued and unused connection tickets
	conns     map[int]*wsConn
	connSeq   int
	rr        int // round robin over connections
	envelopes []*envelope
	envByID   map[string]*envelope
	acks      []Ack

	// Web API
	calls     []Call
	faults    map[string][]fault
	revoked   map[string]bool // tokens Revoke'd
	messages  []*Message      // every channel message, in post order
	ephemeral []*Message
	dmByUser  map[string]string // user → D channel
	// Channels known by name (chat.postMessage to "#gpu-nlp"…).
	chanByName map[string]string // name without "#" → C… ID
	nameByChan map[string]string // C… ID → name
	triggers   map[string]trigger
	responses  map[string]*responseURL
	posts      []ResponsePost
	views      []View
	openViews  map[string]*openView // view ID → view
	lastModal  map[string]string    // user → view ID of the latest modal
	files      []*File
	fileByID   map[string]*File
}

type config struct {
	pingInterval    time.Duration
	ackDeadline     time.Duration
	triggerTTL      time.Duration
	deliveryTimeout time.Duration
	users           []User
	log             Logger
}

// Option configures a Server; see New for the defaults.
type Option func(*config)

// Logger receives the fake's log lines; testing.TB satisfies it.
type Logger interface {
	Logf(format string, args ...any)
}

type writerLogger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *writerLogger) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, strings.TrimSuffix(format, "\n")+"\n", args...)
}

// WriterLogger returns a Logger that writes one line per call to w.
func WriterLogger(w io.Writer) Logger { return &writerLogger{w: w} }

// WithPingInterval sets how often each socket gets a WebSocket ping
// (default 1 s). slack-go reconnects when no ping arrives within its own
// interval (socketmode.OptionPingInterval, 30 s by default), so keep this
// shorter than that.
func WithPingInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.pingInterval = d
		}
	}
}

// WithUsers sets the workspace's users (default DefaultUsers).
func WithUsers(users ...User) Option {
	return func(c *config) { c.users = append([]User(nil), users...) }
}

// WithLogger sends the fake's log to l (default: no log). Pass a testing.TB,
// or WriterLogger(os.Stderr).
func WithLogger(l Logger) Option { return func(c *config) { c.log = l } }

// WithAckDeadline sets how long an envelope may wait for its ack before
// Unacked reports it (default 3 s, Slack's limit).
func WithAckDeadline(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ackDeadline = d
		}
	}
}

// WithTriggerTTL sets how long views.open and views.push accept a trigger_id
// (default 3 s, Slack's limit).
func WithTriggerTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.triggerTTL = d
		}
	}
}

// WithDeliveryTimeout sets how long SlashCommand and the other drivers wait
// for a socket to be connected before giving up on delivery (default 5 s).
func WithDeliveryTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.deliveryTimeout = d
		}
	}
}

// New starts a fake Slack on 127.0.0.1 and returns it; Close stops it.
//
// Defaults: pings every 1 s, ack deadline 3 s, trigger TTL 3 s, delivery
// timeout 5 s, users DefaultUsers, no log.
func New(opts ...Option) *Server {
	cfg := config{
		pingInterval:    time.Second,
		ackDeadline:     3 * time.Second,
		triggerTTL:      3 * time.Second,
		deliveryTimeout: 5 * time.Second,
		users:           DefaultUsers,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	s := &Server{
		cfg:        cfg,
		changed:    make(chan struct{}),
		users:      make(map[string]User),
		tickets:    make(map[string]bool),
		conns:      make(map[int]*wsConn),
		envByID:    make(map[string]*envelope),
		faults:     make(map[string][]fault),
		revoked:    make(map[string]bool),
		dmByUser:   make(map[string]string),
		chanByName: make(map[string]string),
		nameByChan: make(map[string]string),
		triggers:   make(map[string]trigger),
		responses:  make(map[string]*responseURL),
		openViews:  make(map[string]*openView),
		lastModal:  make(map[string]string),
		fileByID:   make(map[string]*File),
	}
	for _, u := range cfg.users {
		if u.RealName == "" {
			u.RealName = u.Name
		}
		if u.TZ == "" {
			u.TZ = "UTC"
		}
		s.users[u.ID] = u
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/link/", s.serveSocket)
	mux.HandleFunc("/upload/", s.serveUpload)
	mux.HandleFunc("/response/", s.serveResponseURL)
	s.http = httptest.NewServer(mux)
	return s
}

// Start is New for a test: the fake logs to t and is closed in t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := New(append([]Option{WithLogger(t)}, opts...)...)
	t.Cleanup(s.Close)
	return s
}

// Close closes every socket, waits for the fake's goroutines and stops the
// server. It is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := make([]*wsConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
	s.http.Close()
	s.wg.Wait()
	s.logMu.Lock()
	s.logOff = true
	s.logMu.Unlock()
}

// URL is the server's base URL (http://127.0.0.1:port).
func (s *Server) URL() string { return s.http.URL }

// APIURL is the Web API base URL for slack.OptionAPIURL; it ends with "/".
func (s *Server) APIURL() string { return s.http.URL + "/api/" }

// logf logs unless the server is closed (a testing.TB must not be used after
// its test ends). It may be called with s.mu held.
func (s *Server) logf(format string, args ...any) {
	if s.cfg.log == nil {
		return
	}
	s.logMu.RLock()
	defer s.logMu.RUnlock()
	if !s.logOff {
		s.cfg.log.Logf("slackfake: "+format, args...)
	}
}

// notifyLocked wakes WaitFor and WaitAck callers. s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextIDLocked returns a fresh ID with the given prefix, e.g. "C" → "C0000007".
func (s *Server) nextIDLocked(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%07d", prefix, s.seq)
}

// nextTSLocked returns a unique message timestamp, strictly greater than every
// earlier one, with a microsecond part as Slack's ("1764576000.000123").
func (s *Server) nextTSLocked() string {
	us := time.Now().UnixMicro()
	if us <= s.lastTS {
		us = s.lastTS + 1
	}
	s.lastTS = us
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}
