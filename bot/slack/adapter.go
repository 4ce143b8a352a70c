package slackbot

import (
	"context"
	"encoding/json"
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
	"github.com/slack-go/slack/slackevents"
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
	outbox  Delivered
	ttl     time.Duration
	dclock  clock.PassiveClock
	httpc   *http.Client
	// pingTimeout: 0 is slack-go's default.
	pingTimeout time.Duration
	checked     bool // Check succeeded

	api   *slack.Client
	dir   *Directory // nil: people are known by Slack ID only
	q     *Queue
	in    Inputs
	ready atomic.Bool

	// Tokens refused while running: tried tokenTries times, tokenEvery
	// apart, before Run gives up.
	tokenTries int
	tokenEvery time.Duration
	refusal    atomic.Pointer[string] // why /readyz fails, while rechecking
	rechecking atomic.Bool
	revokedErr atomic.Pointer[error]
	runCtx     context.Context
	stopRun    context.CancelFunc

	mu      sync.Mutex
	sock    *socketConn               // the newest Socket Mode connection
	lanes   map[string]string         // request → lane of its card
	cards   map[string]records.Thread // request → card
	dms     map[string]string         // user → DM channel
	chanIDs map[string]string         // channel name → ID
	routes  map[string]*route         // user+channel → response_url
	homes   map[string]time.Time      // user → when they last opened App Home

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
func WithDeduper(d bot.Deduper, ttl time.Duration, c clock.PassiveClock) Option {
	return func(a *Adapter) { a.dedupe, a.ttl, a.dclock = d, ttl, c }
}

// Delivered is told when a kept output (one with a Seq) has gone out.
// *store.DB satisfies it.
type Delivered interface {
	Delivered(ctx context.Context, seq uint64) error
}

// WithOutbox tells o once each kept output's Web API calls are done
// (made, or given up after their retries); calls still queued when
// gpubot stops are not, so the output is sent again at the next start
// (bot.Runtime.Replay). Default: nobody is told.
func WithOutbox(o Delivered) Option { return func(a *Adapter) { a.outbox = o } }

// WithPingTimeout sets how long the connection may go without a ping
// from Slack before it is replaced. Default 30 s (slack-go's).
func WithPingTimeout(d time.Duration) Option { return func(a *Adapter) { a.pingTimeout = d } }

// WithTokenRecheck sets how Run confirms that Slack refuses a token
// while running (token_revoked, invalid_auth, …, from a Web API call or
// on reconnecting): it asks again up to tries times, every apart on the
// adapter's clock, with /readyz failing meanwhile, and stops with
// ErrBotToken or ErrAppToken if Slack still refuses. Default: 3 times,
// 10 s apart.
func WithTokenRecheck(tries int, every time.Duration) Option {
	return func(a *Adapter) { a.tokenTries, a.tokenEvery = max(1, tries), every }
}

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
		dms: map[string]string{}, routes: map[string]*route{}, homes: map[string]time.Time{}, chanIDs: map[string]string{},
		homeEvery:  time.Minute,
		tokenTries: 3, tokenEvery: 10 * time.Second,
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
	a.q.refused, a.q.onRefused = refused, a.tokenRefused
	a.runCtx, a.stopRun = context.WithCancel(context.Background())
	return a
}

// Errors Run returns for tokens Slack refuses. The messages never contain
// the token.
var (
	ErrBotToken = errors.New("SLACK_BOT_TOKEN was refused by Slack")
	ErrAppToken = errors.New("SLACK_APP_TOKEN was refused by Slack")
)

// Ready reports whether a Socket Mode connection is up and Slack takes
// the bot token (for /readyz).
func (a *Adapter) Ready() error {
	if p := a.refusal.Load(); p != nil {
		return errors.New(*p)
	}
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
// Slack refuses a token (ErrBotToken or ErrAppToken, wrapped): at start,
// or while running, once the bounded recheck (WithTokenRecheck) confirms
// it. Work goes to in. On the way out it gives queued replies up to 5 s
// to go out.
func (a *Adapter) Run(ctx context.Context, in Inputs) error {
	a.in = in
	if !a.checked {
		if err := a.Check(ctx); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.runCtx, a.stopRun = ctx, cancel

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

	var wg sync.WaitGroup
	sctx, stopSocket := context.WithCancel(ctx)
	frames := make(chan frame)
	fatal := make(chan error, 1)
	wg.Go(func() { a.maintain(sctx, frames, fatal, &wg) })
	stop := func() {
		stopSocket()
		a.mu.Lock()
		if a.sock != nil {
			a.sock.close()
		}
		a.mu.Unlock()
		wg.Wait()
		a.ready.Store(false)
	}
	for {
		select {
		case <-ctx.Done():
			stop()
			if err := a.revokedErr.Load(); err != nil {
				return *err
			}
			return nil
		case err := <-fatal:
			stop()
			return err
		case f := <-frames:
			a.frame(ctx, f)
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

// slackCode is the error code of a Web API answer {"ok":false,"error":…},
// or "".
func slackCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}

// refused reports whether err is Slack refusing a token.
func refused(err error) bool {
	switch slackCode(err) {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
		return true
	}
	return false
}

// recheck asks Slack again (probe), up to a.tokenTries times a.tokenEvery
// apart on the adapter's clock, whether it takes the token called name,
// while /readyz says it does not. It returns nil as soon as Slack takes
// it, or the last refusal. Answers that are not a refusal (the network)
// do not count, up to three times as many probes in all.
func (a *Adapter) recheck(ctx context.Context, name string, probe func(context.Context) error) error {
	var last error
	for refusals, probes := 0, 0; refusals < a.tokenTries && probes < 3*a.tokenTries; probes++ {
		if probes > 0 {
			select {
			case <-ctx.Done():
				return last
			case <-a.clock.After(a.tokenEvery):
			}
		}
		err := probe(ctx)
		switch {
		case err == nil:
			if last != nil {
				a.log.Info("Slack takes the token again", "token", name)
			}
			a.refusal.Store(nil)
			return nil
		case refused(err):
			last = err
			refusals++
			msg := fmt.Sprintf("Slack refuses %s (%s)", name, a.scrub(err.Error()))
			a.refusal.Store(&msg)
			a.log.Error("Slack refuses the token; checking again before giving up", "token", name, "refusals", refusals, "of", a.tokenTries, "err", a.scrub(err.Error()))
		default:
			a.log.Warn("checking the token with Slack", "token", name, "err", a.scrub(err.Error()))
		}
	}
	if last == nil {
		last = errors.New("could not reach Slack to check the token")
	}
	return last
}

// tokenRefused is the outbound queue telling that Slack refused the bot
// token on a call: the first one starts a recheck; if Slack keeps
// refusing, Run stops with ErrBotToken and the process exits.
func (a *Adapter) tokenRefused(err error) {
	msg := fmt.Sprintf("Slack refuses SLACK_BOT_TOKEN (%s)", a.scrub(err.Error()))
	a.refusal.Store(&msg)
	if !a.rechecking.CompareAndSwap(false, true) {
		return
	}
	ctx := a.runCtx
	go func() {
		defer a.rechecking.Store(false)
		err := a.recheck(ctx, "SLACK_BOT_TOKEN", func(ctx context.Context) error { _, err := a.api.AuthTestContext(ctx); return err })
		if err == nil || ctx.Err() != nil {
			return
		}
		e := fmt.Errorf("%w while running (%s): gpubot cannot post anything; install the app again or give it a new Bot User OAuth Token (xoxb-…)", ErrBotToken, a.scrub(err.Error()))
		a.revokedErr.Store(&e)
		a.stopRun()
	}()
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

// frame handles one frame from a socket. It only acks and enqueues: the
// sockets must be read promptly. A panic is logged and the envelope
// acked (once), so that one bad payload cannot stop the bot.
func (a *Adapter) frame(ctx context.Context, f frame) {
	if f.err != nil {
		a.mu.Lock()
		current := a.sock == f.conn
		a.mu.Unlock()
		if current {
			a.ready.Store(false)
		}
		if !f.conn.draining.Load() && ctx.Err() == nil {
			a.log.Info("Slack connection lost; reconnecting", "conn", f.conn.id, "err", a.scrub(f.err.Error()))
		} else {
			a.log.Debug("a Slack socket closed", "conn", f.conn.id)
		}
		return
	}
	env, err := readEnvelope(f.data)
	if err != nil {
		a.log.Warn("a Socket Mode message gpubot cannot read; ignored", "conn", f.conn.id, "bytes", len(f.data), "err", err)
		return
	}
	env.conn = f.conn
	d := &delivery{a: a, env: env}
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("panic handling a Slack envelope", "type", env.Type, "envelope", env.EnvelopeID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			d.ack(ctx, nil)
		}
	}()
	a.envelope(ctx, d)
}

// envelope dispatches one envelope by type.
func (a *Adapter) envelope(ctx context.Context, d *delivery) {
	env := d.env
	switch env.Type {
	case "hello":
		a.mu.Lock()
		current := a.sock == env.conn
		a.mu.Unlock()
		if current && !a.ready.Swap(true) {
			a.log.Info("connected to Slack", "conn", env.conn.id)
		}
		return
	case "disconnect":
		a.mu.Lock()
		if a.sock == env.conn {
			a.ready.Store(false)
		}
		a.mu.Unlock()
		a.log.Info("Slack asked to reconnect; reading the old socket until it closes", "reason", env.Reason, "conn", env.conn.id)
		return
	}
	if env.EnvelopeID == "" {
		a.log.Warn("a Socket Mode envelope without an envelope_id; cannot ack it", "type", env.Type, "bad", strings.Join(env.bad, "; "), "summary", redacted(env.Payload))
		return
	}
	switch env.Type {
	case "slash_commands":
		var cmd slack.SlashCommand
		if err := json.Unmarshal(env.Payload, &cmd); err != nil {
			a.malformed(ctx, d, "command", unreadableWhy(env.Payload, err))
			return
		}
		a.slash(ctx, d, cmd)
	case "interactive":
		var cb slack.InteractionCallback
		if err := json.Unmarshal(env.Payload, &cb); err != nil {
			a.malformed(ctx, d, interactionKind(env.Payload), unreadableWhy(env.Payload, err))
			return
		}
		a.interactive(ctx, d, cb)
	case "events_api":
		e, err := slackevents.ParseEvent(env.Payload, slackevents.OptionNoVerifyToken())
		if err != nil {
			a.malformed(ctx, d, "event", unreadableWhy(env.Payload, err))
			return
		}
		d.ack(ctx, nil)
		a.eventsAPI(e, env.EnvelopeID)
	case "":
		a.malformed(ctx, d, "message", "the envelope has no type"+badFields(env))
	default:
		a.malformed(ctx, d, "message", fmt.Sprintf("gpubot does not know envelopes of type %q", cutLog(env.Type)))
	}
}

func badFields(env envelope) string {
	if len(env.bad) == 0 {
		return ""
	}
	return " (" + strings.Join(env.bad, "; ") + ")"
}

// slogPrinter adapts slog to slack-go's logger (debug level).
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Output(_ int, s string) error {
	p.log.Debug(strings.TrimSpace(s), "component", "slack-go")
	return nil
}
