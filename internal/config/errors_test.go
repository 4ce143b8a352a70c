package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestErrorFormat(t *testing.T) {
	tests := map[string]struct {
		err  *Error
		want string
	}{
		"everything": {
			err:  &Error{File: "gpubot.yaml", Line: 42, Column: 7, Field: "teams[1].quota.h100.nominal", Msg: "must not be negative"},
			want: "gpubot.yaml:42:7: teams[1].quota.h100.nominal: must not be negative",
		},
		"no column": {
			err:  &Error{File: "gpubot.yaml", Line: 3, Msg: "did not find expected node content"},
			want: "gpubot.yaml:3: did not find expected node content",
		},
		"no position": {
			err:  &Error{File: "gpubot.yaml", Field: "teams", Msg: "is required"},
			want: "gpubot.yaml: teams: is required",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestErrorsCollected checks that one Parse reports every problem, in
// file order, and that callers can get at them with errors.As.
func TestErrorsCollected(t *testing.T) {
	yaml := strings.Replace(minimal, "{name: alice}", "{name: alice, slackID: nope}", 1) +
		"timezone: Nowhere/Land\ndefaultPriority: hgih\n"
	_, err := Parse("gpubot.yaml", []byte(yaml))
	want := `gpubot.yaml:3:33: people[0].slackID: "nope" is not a Slack user ID: U or W followed by capital letters and digits, like U0123ABCD
gpubot.yaml:5:11: timezone: unknown time zone "Nowhere/Land"; use an IANA name like Europe/Berlin or America/New_York
gpubot.yaml:6:18: defaultPriority: unknown priority "hgih" (known: normal)`
	if err == nil || err.Error() != want {
		t.Fatalf("Parse() error:\n%v\nwant:\n%s", err, want)
	}

	var list Errors
	if !errors.As(err, &list) || len(list) != 3 {
		t.Errorf("errors.As(Errors) = %v, want 3 errors", list)
	}
	var ptr *Errors
	if !errors.As(err, &ptr) || len(*ptr) != 3 {
		t.Errorf("errors.As(*Errors) did not find the list")
	}
	var first *Error
	if !errors.As(err, &first) {
		t.Fatal("errors.As(*Error) found nothing")
	}
	wantFirst := &Error{File: "gpubot.yaml", Line: 3, Column: 33, Field: "people[0].slackID",
		Msg: `"nope" is not a Slack user ID: U or W followed by capital letters and digits, like U0123ABCD`}
	if diff := cmp.Diff(wantFirst, first); diff != "" {
		t.Errorf("first error (-want +got):\n%s", diff)
	}
}

func TestClosest(t *testing.T) {
	known := []string{"name", "gpusPerNode", "nodes", "members", "teams", "high", "low"}
	tests := map[string]string{
		"membrs":        "members", // deletion
		"gpus_per_node": "gpusPerNode",
		"GPUSPERNODE":   "gpusPerNode",
		"hgih":          "high", // transposition
		"team":          "teams",
		"nmae":          "name",
		"lwo":           "low",
		"x":             "",
		"quota":         "",
		"highest":       "",
	}
	for word, want := range tests {
		t.Run(word, func(t *testing.T) {
			if got := closest(word, known); got != want {
				t.Errorf("closest(%q) = %q, want %q", word, got, want)
			}
		})
	}
}

func ExampleParse() {
	_, err := Parse("gpubot.yaml", []byte(`
priorities: [{name: normal, value: 100}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 4}}]
people: [{name: alice, slackID: U0ALICE}]
teams:
  - name: nlp
    membrs: [alice]
    quota: {h100: {nominal: -8}}
`))
	fmt.Println(err)
	// Output:
	// gpubot.yaml:7:5: teams[0].membrs: unknown key "membrs"; did you mean "members"?
	// gpubot.yaml:8:29: teams[0].quota.h100.nominal: must not be negative
}
