package commands

import "context"

// FormDefaults is what a request form offers a person: the words they may
// choose and the defaults to preselect.
type FormDefaults struct {
	// Known is false for a person gpubot does not know.
	Known bool
	// Teams are the person's teams (every team for an admin in none).
	Teams []string
	// Flavors are the flavors the person's teams have quota on, in the
	// teams' order.
	Flavors    []string
	Priorities []string // lowest first
	Topologies []string // host, rack, block
	Team       string   // the person's first team
	Priority   string   // the default priority
}

// FormDefaults returns what a request form should offer user (a chat user
// ID or a person's name).
func (s *Service) FormDefaults(user string) FormDefaults {
	return FormDefaults{}
}

// Home is the App Home content for user: their open and recent requests,
// their team's usage and fair-share standing, and capacity per flavor.
// An unknown user gets a reply saying how to get added.
func (s *Service) Home(ctx context.Context, user string) Reply {
	return Reply{}
}
