package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// Tracked describes a workload that gpubot follows without having
// created a request for it first: one named by /gpu track, or, at start,
// one that carries gpubot's labels but that the store does not know.
type Tracked struct {
	// ID is the request ID the workload is labelled with; Track leaves it
	// to the caller, who chose it.
	ID        string
	Requester string
	Team      string
	GPUs      int
	Flavor    string // pinned flavor, or ""
	Priority  string // a configured priority name
	Duration  time.Duration
	Topology  string
	Template  string
	Channel   string // "" for the team's channel
	Reason    string
	Origin    string // "track" or "adopted"
	Created   time.Time
	// Admission is set while the workload holds quota.
	Admission *allocator.Admission
	// Finished is set once the workload has ended.
	Finished bool
}

// Tracker labels a workload submitted elsewhere so that its events reach
// gpubot under request ID id. It is optional: without one, track answers
// that it needs a Kubernetes cluster.
type Tracker interface {
	Track(ctx context.Context, namespace, job, id, requester string) (Tracked, error)
}

// WithTracker enables /gpu track. Default: none (track is refused).
func WithTracker(t Tracker) Option { return func(s *Service) { s.tracker = t } }

// track handles /gpu track <namespace>/<job>.
func (s *Service) track(c *call, namespace, job string) {
	target := namespace + "/" + job
	if s.tracker == nil {
		s.audit(c, c.who.Name, "track", target, "refused", "no cluster")
		c.private(plain(fmt.Sprintf("track follows a workload submitted outside gpubot, so it needs a Kubernetes cluster; gpubot is running on its simulated cluster, where every workload is already a gpubot request. Connect a cluster (--kubeconfig) to track %s.", target)))
		return
	}
	// The tracker writes the ID on the Job before anything is stored.
	id, err := s.deps.IDs.ReserveRequestID(c.ctx)
	if err != nil {
		s.failed(c, "tracking "+target, err)
		return
	}
	t, err := s.tracker.Track(c.ctx, namespace, job, id, c.who.Name)
	if err != nil {
		s.audit(c, c.who.Name, "track", target, "refused", err.Error())
		c.private(plain(fmt.Sprintf("Cannot track %s: %s. Nothing was changed.", target, plainError(err))))
		return
	}
	if t.ID != "" && t.ID != id {
		c.private(plain(fmt.Sprintf("%s is already followed as %s; /gpu status %s shows it.", target, t.ID, t.ID)))
		return
	}
	t.ID, t.Origin = id, "track"
	if t.Requester == "" {
		t.Requester = c.who.Name
	}
	if t.Reason == "" {
		t.Reason = "tracked " + target
	}
	r := s.fromTracked(c, t)
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+id, err)
		return
	}
	s.audit(c, c.who.Name, "track", id, "ok", target+": "+describe(r))
	c.changed = true
	c.emit(Output{To: Destination{Kind: ToChannel, Channel: r.Channel, Request: r.ID}, Reply: s.card(c, r, nil)})
	c.private(plain(fmt.Sprintf("Tracking %s as %s (%s); updates follow in its thread in %s.", target, id, r.State, r.Channel)))
}

// Adopt records workloads that carry gpubot's labels but that the store
// does not know (a restored or lost data directory), so that they are
// followed like any request. Workloads whose ID the store has are left
// alone. It returns the cards to post.
func (s *Service) Adopt(ctx context.Context, ws []Tracked) []Output {
	c := &call{ctx: ctx, now: s.deps.Clock.Now(), who: &Person{Name: "gpubot"}}
	s.adopt(c, ws)
	return c.unsent()
}

// adopt is Adopt in the write section.
func (s *Service) adopt(c *call, ws []Tracked) {
	defer s.enter(c)()
	for _, t := range ws {
		if t.ID == "" {
			continue
		}
		if _, err := s.getRequest(c, t.ID); err == nil {
			continue
		}
		if t.Origin == "" {
			t.Origin = "adopted"
		}
		r := s.fromTracked(c, t)
		if err := s.putRequest(c, r); err != nil {
			s.log.Error("adopting workload", "request", t.ID, "err", err)
			continue
		}
		s.audit(c, "gpubot", "adopt", r.ID, "ok", "found in the cluster, unknown to the store: "+describe(r))
		c.emit(Output{To: Destination{Kind: ToChannel, Channel: r.Channel, Request: r.ID}, Reply: s.card(c, r, nil)})
	}
}

// fromTracked builds the request record for t.
func (s *Service) fromTracked(c *call, t Tracked) records.Request {
	created := t.Created
	if created.IsZero() {
		created = c.now
	}
	r := records.Request{
		ID: t.ID, Requester: t.Requester, Team: t.Team, GPUs: t.GPUs, Flavor: t.Flavor,
		Priority: t.Priority, Duration: t.Duration, Topology: t.Topology, Template: t.Template,
		Reason: t.Reason, Channel: t.Channel, Origin: t.Origin,
		State: records.StateQueued, CreatedAt: created, SubmittedAt: created, QueuedAt: created,
	}
	if r.Priority == "" {
		r.Priority = s.set.DefaultPriority
	}
	if r.Channel == "" {
		r.Channel = s.channelOf(r.Team)
	}
	switch {
	case t.Finished:
		r.State, r.EndedAt, r.EndReason = records.StateFinished, c.now, "had finished when gpubot found it"
	case t.Admission != nil:
		r.State = records.StateRunning
		r.AdmittedAt = t.Admission.At
		r.AdmittedFlavor = t.Admission.Flavor
		r.Nodes = append([]string(nil), t.Admission.Nodes...)
	}
	return r
}
