package slackbot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Config says how to reach Slack.
type Config struct {
	// BotToken (xoxb-…) calls the Web API; AppToken (xapp-…, with
	// connections:write) opens Socket Mode connections. Both required.
	BotToken, AppToken string
	// APIURL is the Web API base URL; "" is DefaultAPIURL. A missing
	// trailing "/" is added.
	APIURL string
	// Pacing is each channel's message rate; zero is 1 per second after a
	// burst of 3.
	Pacing Pacing
}

// Inputs takes work for the runtime's workers. *bot.Runtime satisfies it.
type Inputs interface {
	Submit(ev bot.Event) error
}

// Service is what the adapter asks the command service directly: the
// request form's choices, the parser's vocabulary and App Home.
// *commands.Service satisfies it.
type Service interface {
	FormDefaults(user string) commands.FormDefaults
	Vocabulary() commands.Vocabulary
	Home(ctx context.Context, user string) commands.Reply
}

// ThreadStore remembers where each request's card is. *store.DB
// satisfies it.
type ThreadStore interface {
	PutThread(ctx context.Context, requestID string, t records.Thread) error
	GetThread(ctx context.Context, requestID string) (records.Thread, error)
}

// Adapter is gpubot on Slack. Create it with New, give it to bot.New as
// the Sender, and Run it.
type Adapter struct {
	cfg     Config
	svc     Service
	threads ThreadStore
	log     *slog.Logger
	clock   clock.Clock
	observe func(method string, d time.Duration)
	dedupe  bot.Deduper
	ttl     time.Duration
	dclock  bot.Clock
	httpc   *http.Client
	// pingTimeout: 0 is slack-go's default.
	pingTimeout time.Duration
	checked     bool // Check succeeded

	api   *slack.Client
	dir   *Directory // nil: people are known by Slack ID only
	q     *Queue
	in    Inputs
	ready atomic.Bool

	mu     sync.Mutex
	lanes  map[string]string         // request → lane of its card
	cards  map[string]records.Thread // request → card
	dms    map[string]string         // user → DM channel
	routes map[string]*route         // user+channel → response_url
	homes  map[string]time.Time      // user → when they last opened App Home

	homeEvery time.Duration // how often App Home is refreshed after changes
	homeDirty atomic.Bool   // something was sent since the last refresh
}

// homeKeep is how long after opening App Home a person's Home tab is
// kept current.
const homeKeep = 24 * time.Hour

// route is a response_url Slack handed out: valid 30 minutes, 5 uses.
type route struct {
	url  string
	at   time.Time
	uses int
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(a *Adapter) { a.log = l } }

// WithClock sets the clock used for pacing, waits and response_url ages.
// Default: the real clock.
func WithClock(c clock.Clock) Option { return func(a *Adapter) { a.clock = c } }

// WithObserver is told the latency of every Web API call, by method.
// Default: nothing.
func WithObserver(f func(method string, d time.Duration)) Option {
	return func(a *Adapter) { a.observe = f }
}

// WithDeduper drops App Home events seen within ttl by c's time
// (commands and buttons are deduplicated by the runtime). Default: none.
func WithDeduper(d bot.Deduper, ttl time.Duration, c bot.Clock) Option {
	return func(a *Adapter) { a.dedupe, a.ttl, a.dclock = d, ttl, c }
}

// WithPingTimeout sets how long the connection may go without a ping
// from Slack before it is replaced. Default 30 s (slack-go's).
func WithPingTimeout(d time.Duration) Option { return func(a *Adapter) { a.pingTimeout = d } }

// WithHomeRefresh sets how often the Home tab of people who opened it in
// the last day is published again when anything was sent since the last
// time. Default: every minute.
func WithHomeRefresh(d time.Duration) Option { return func(a *Adapter) { a.homeEvery = d } }

// WithHTTPClient sets the HTTP client for the Web API (its Transport is
// wrapped to observe latency). Default: a client with a 30 s timeout.
func WithHTTPClient(c *http.Client) Option { return func(a *Adapter) { a.httpc = c } }

// New returns an adapter; cfg's tokens, svc and threads are required.
func New(cfg Config, svc Service, threads ThreadStore, opts ...Option) *Adapter {
	a := &Adapter{
		cfg: cfg, svc: svc, threads: threads,
		log: slog.New(slog.DiscardHandler), clock: clock.RealClock{},
		observe: func(string, time.Duration) {},
		httpc:   &http.Client{Timeout: 30 * time.Second},
		lanes:   map[string]string{}, cards: map[string]records.Thread{},
		dms: map[string]string{}, routes: map[string]*route{}, homes: map[string]time.Time{},
		homeEvery: time.Minute,
	}
	for _, o := range opts {
		o(a)
	}
	if a.cfg.APIURL == "" {
		a.cfg.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(a.cfg.APIURL, "/") {
		a.cfg.APIURL += "/"
	}
	if a.cfg.Pacing.PerSecond == 0 {
		a.cfg.Pacing = Pacing{PerSecond: 1, Burst: 3}
	}
	hc := *a.httpc
	hc.Transport = observing{next: transportOf(a.httpc), observe: func(m string, d time.Duration) { a.observe(m, d) }}
	a.httpc = &hc
	a.api = slack.New(a.cfg.BotToken,
		slack.OptionAPIURL(a.cfg.APIURL),
		slack.OptionAppLevelToken(a.cfg.AppToken),
		slack.OptionHTTPClient(a.httpc),
		slack.OptionLog(slogPrinter{a.log}))
	a.q = NewQueue(a.cfg.Pacing, WithQueueClock(a.clock), WithQueueLogger(a.log))
	a.q.scrub = a.scrub
	return a
}

// Errors Run returns for tokens Slack refuses. The messages never contain
// the token.
var (
	ErrBotToken = errors.New("SLACK_BOT_TOKEN was refused by Slack")
	ErrAppToken = errors.New("SLACK_APP_TOKEN was refused by Slack")
)

// Ready reports whether a Socket Mode connection is up (for /readyz).
func (a *Adapter) Ready() error {
	if !a.ready.Load() {
		return errors.New("Slack not connected")
	}
	return nil
}

// Pending is the number of Web API calls waiting in the outbound queue.
func (a *Adapter) Pending() int { return a.q.Pending() }

// RateLimited is the number of Web API calls Slack answered with HTTP 429
// so far (each was tried again after its Retry-After).
func (a *Adapter) RateLimited() uint64 { return a.q.RateLimited() }

// Run checks the tokens, connects and serves until ctx ends (nil) or
// Slack refuses a token (ErrBotToken or ErrAppToken, wrapped). Work goes
// to in. On the way out it gives queued replies up to 5 s to go out.
func (a *Adapter) Run(ctx context.Context, in Inputs) error {
	a.in = in
	if !a.checked {
		if err := a.Check(ctx); err != nil {
			return err
		}
	}

	qctx, stopQueue := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		drain, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.q.Drain(drain); err != nil {
			a.log.Warn("stopping with Slack replies not sent", "err", err)
		}
		cancel()
		stopQueue()
		a.q.Wait()
	}()
	a.q.Start(qctx)
	go a.refreshHomes(ctx)

	smOpts := []socketmode.Option{socketmode.OptionLog(slogPrinter{a.log})}
	if a.pingTimeout > 0 {
		smOpts = append(smOpts, socketmode.OptionPingInterval(a.pingTimeout))
	}
	sm := socketmode.New(a.api, smOpts...)
	sctx, stopSocket := context.WithCancel(ctx)
	defer stopSocket()
	errc := make(chan error, 1)
	go func() { errc <- sm.RunContext(sctx) }()
	for {
		select {
		case <-ctx.Done():
			stopSocket()
			<-errc
			a.ready.Store(false)
			return nil
		case err := <-errc:
			a.ready.Store(false)
			if ctx.Err() != nil {
				return nil
			}
			if refused(err) {
				return fmt.Errorf("%w (%s): check that it is an app-level token (xapp-…) with connections:write of this app, and that Socket Mode is on", ErrAppToken, a.scrub(err.Error()))
			}
			return fmt.Errorf("Slack Socket Mode: %s", a.scrub(err.Error()))
		case ev := <-sm.Events:
			a.event(ctx, sm, ev)
		}
	}
}

// Check checks the tokens' form and the bot token with Slack (auth.test),
// so that a caller can fail before starting anything else. Run checks
// too, unless Check succeeded already. The app token is checked when Run
// connects.
func (a *Adapter) Check(ctx context.Context) error {
	if err := checkToken("SLACK_BOT_TOKEN", a.cfg.BotToken, "xoxb-", "the app's Bot User OAuth Token (OAuth & Permissions)"); err != nil {
		return err
	}
	if err := checkToken("SLACK_APP_TOKEN", a.cfg.AppToken, "xapp-", "an app-level token with the connections:write scope (Basic Information → App-Level Tokens)"); err != nil {
		return err
	}
	auth, err := a.api.AuthTestContext(ctx)
	if err != nil {
		if refused(err) {
			return fmt.Errorf("%w (%s): check that it is the Bot User OAuth Token (xoxb-…) of an installed app", ErrBotToken, a.scrub(err.Error()))
		}
		return fmt.Errorf("connecting to Slack at %s: %s", a.cfg.APIURL, a.scrub(err.Error()))
	}
	a.log.Info("Slack bot token accepted", "team", auth.Team, "botUser", auth.UserID)
	a.checked = true
	return nil
}

func checkToken(name, tok, prefix, what string) error {
	switch {
	case tok == "":
		return fmt.Errorf("%s is not set; it must be %s", name, what)
	case !strings.HasPrefix(tok, prefix):
		return fmt.Errorf("%s does not start with %q; it must be %s", name, prefix, what)
	}
	return nil
}

// refused reports whether err is Slack refusing a token.
func refused(err error) bool {
	switch err.Error() {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
		return true
	}
	return false
}

// scrub removes the tokens from s.
func (a *Adapter) scrub(s string) string {
	for _, t := range []string{a.cfg.BotToken, a.cfg.AppToken} {
		if len(t) > 8 {
			s = strings.ReplaceAll(s, t, "[token]")
		}
	}
	return s
}

// event handles one Socket Mode event. It only acks and enqueues: the
// socket's event channel must be read promptly. A panic is logged and the
// envelope acked, so that one bad payload cannot stop the bot.
func (a *Adapter) event(ctx context.Context, sm *socketmode.Client, ev socketmode.Event) {
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("panic handling a Slack event", "type", string(ev.Type), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			a.ack(ctx, sm, ev.Request, nil)
		}
	}()
	switch ev.Type {
	case socketmode.EventTypeConnecting:
		a.log.Debug("connecting to Slack")
	case socketmode.EventTypeConnected, socketmode.EventTypeHello:
		if !a.ready.Swap(true) {
			a.log.Info("connected to Slack")
		}
	case socketmode.EventTypeConnectionError:
		a.ready.Store(false)
		if ce, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
			a.log.Warn("cannot connect to Slack; retrying", "attempt", ce.Attempt, "backoff", ce.Backoff, "err", a.scrub(fmt.Sprint(ce.ErrorObj)))
		}
	case socketmode.EventTypeDisconnect:
		a.ready.Store(false)
		reason := ""
		if ev.Request != nil {
			reason = ev.Request.Reason
		}
		a.log.Info("Slack asked to reconnect", "reason", reason)
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("Socket Mode trouble", "type", string(ev.Type), "detail", a.scrub(fmt.Sprintf("%v", ev.Data)))
	case socketmode.EventTypeSlashCommand:
		if cmd, ok := ev.Data.(slack.SlashCommand); ok && ev.Request != nil {
			a.slash(ctx, sm, ev.Request, cmd)
			return
		}
		a.ack(ctx, sm, ev.Request, nil)
	case socketmode.EventTypeInteractive:
		if cb, ok := ev.Data.(slack.InteractionCallback); ok && ev.Request != nil {
			a.interactive(ctx, sm, ev.Request, cb)
			return
		}
		a.ack(ctx, sm, ev.Request, nil)
	case socketmode.EventTypeEventsAPI:
		a.ack(ctx, sm, ev.Request, nil)
		a.eventsAPI(ev)
	default:
		if ev.Request != nil && ev.Request.EnvelopeID != "" {
			a.ack(ctx, sm, ev.Request, nil)
		}
	}
}

// ack acknowledges an envelope, with an optional payload.
func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, req *socketmode.Request, payload any) {
	if req == nil || req.EnvelopeID == "" {
		return
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := sm.AckCtx(actx, req.EnvelopeID, payload); err != nil {
		a.log.Warn("acking a Slack envelope", "envelope", req.EnvelopeID, "err", err)
	}
}

// slogPrinter adapts slog to slack-go's logger (debug level).
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Output(_ int, s string) error {
	p.log.Debug(strings.TrimSpace(s), "component", "slack-go")
	return nil
}
