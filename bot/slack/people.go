package slackbot

import (
	"cmp"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/commands"
)

// Directory matches Slack users to gpubot's people by e-mail address, for
// people whose configuration has an email but no slackID. It asks Slack
// (users.info and users.lookupByEmail, which need the users:read and
// users:read.email scopes) and remembers the answers for an hour.
//
// It is optional (config slack.matchByEmail): without it, people are
// known by their slackID only.
type Directory struct {
	a      *Adapter
	byMail map[string]string // lower-case email → person, for people without a Slack ID
	known  map[string]bool   // Slack IDs in the configuration

	mu     sync.Mutex
	names  map[string]entry // Slack ID → person ("" for nobody)
	ids    map[string]entry // person → Slack ID ("" for nobody)
	lookup func(ctx context.Context, user string) (email string, err error)
	find   func(ctx context.Context, email string) (user string, err error)
}

type entry struct {
	v  string
	at time.Time
}

const directoryTTL = time.Hour

// MatchByEmail turns on e-mail matching for people (the configuration's)
// and returns the Directory, whose Handler wraps the command handler.
func (a *Adapter) MatchByEmail(people []commands.Person) *Directory {
	d := &Directory{a: a, byMail: map[string]string{}, known: map[string]bool{}, names: map[string]entry{}, ids: map[string]entry{}}
	for _, p := range people {
		switch {
		case p.ChatID != "":
			d.known[p.ChatID] = true
		case p.Email != "":
			d.byMail[strings.ToLower(p.Email)] = p.Name
		}
	}
	d.lookup = func(ctx context.Context, user string) (string, error) {
		u, err := a.api.GetUserInfoContext(ctx, user)
		if err != nil {
			return "", err
		}
		return u.Profile.Email, nil
	}
	d.find = func(ctx context.Context, email string) (string, error) {
		u, err := a.api.GetUserByEmailContext(ctx, email)
		if err != nil {
			return "", err
		}
		return u.ID, nil
	}
	a.dir = d
	return d
}

// name is who Slack user is to gpubot: the person matched by e-mail, or
// the Slack ID itself (which the service knows from slackID, or answers
// as a stranger).
func (d *Directory) name(ctx context.Context, user string) string {
	if d == nil || len(d.byMail) == 0 || d.known[user] || user == "" {
		return user
	}
	now := d.a.clock.Now()
	d.mu.Lock()
	e, ok := d.names[user]
	d.mu.Unlock()
	if ok && now.Sub(e.at) < directoryTTL {
		return orID(e.v, user)
	}
	email, err := d.lookup(ctx, user)
	if err != nil {
		d.a.log.Warn("looking up a Slack user's e-mail", "user", user, "err", d.a.scrub(err.Error()))
		return user // not cached: try again next time
	}
	name := d.byMail[strings.ToLower(email)]
	d.mu.Lock()
	d.names[user] = entry{name, now}
	if name != "" {
		d.ids[name] = entry{user, now}
	}
	d.mu.Unlock()
	return orID(name, user)
}

func orID(name, id string) string {
	if name == "" {
		return id
	}
	return name
}

// id is person's Slack ID found by e-mail, or "".
func (d *Directory) id(ctx context.Context, person string) string {
	if d == nil {
		return ""
	}
	var email string
	for m, p := range d.byMail {
		if strings.EqualFold(p, person) {
			email = m
		}
	}
	if email == "" {
		return ""
	}
	now := d.a.clock.Now()
	d.mu.Lock()
	e, ok := d.ids[person]
	d.mu.Unlock()
	if ok && now.Sub(e.at) < directoryTTL {
		return e.v
	}
	id, err := d.find(ctx, email)
	if err != nil && err.Error() != "users_not_found" {
		d.a.log.Warn("looking up a person by e-mail", "person", person, "err", d.a.scrub(err.Error()))
		return ""
	}
	d.mu.Lock()
	d.ids[person] = entry{id, now}
	if id != "" {
		d.names[id] = entry{person, now}
	}
	d.mu.Unlock()
	return id
}

// Handler wraps the command handler: an input from a Slack user matched
// by e-mail is handled as from that person. Replies to the sender still
// go to the Slack user (Input.ReplyTo; the runtime also addresses what it
// is returned from its own input).
func (d *Directory) Handler(next bot.Handler) bot.Handler {
	return handlerFunc(func(ctx context.Context, in commands.Input) []commands.Output {
		in.ReplyTo = cmp.Or(in.ReplyTo, in.User)
		in.User = d.name(ctx, in.User)
		return next.Handle(ctx, in)
	})
}

type handlerFunc func(context.Context, commands.Input) []commands.Output

func (f handlerFunc) Handle(ctx context.Context, in commands.Input) []commands.Output {
	return f(ctx, in)
}
