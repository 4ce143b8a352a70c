package commands

import "testing"

// Typical lines, valid and not.
var (
	parseBenchValid = []string{
		"/gpu request 8xh100 for 4h team nlp",
		`request 16 x A100 for 1d12h team vision priority high topology rack reason "fine-tune llama 3"`,
		"request 8×h100 2 hours",
		"status r12",
		"queue h100",
		"usage nlp 30d",
		"whatif +8xh100",
		"extend r12 by 2h",
		"deny r12 too big for a weekend",
		"capacity",
	}
	parseBenchInvalid = []string{
		"reqest 8xh100 4h",
		"request 8xh10 for 4h prio high",
		"request 8xh100 for 4h teem nlp",
		`request 8xh100 4h reason "unterminated`,
		"request",
		"cancel foo",
	}
)

// BenchmarkParse parses one line per operation, cycling through the
// lines of each set.
func BenchmarkParse(b *testing.B) {
	sets := map[string][]string{
		"mix":     append(append([]string(nil), parseBenchValid...), parseBenchInvalid...),
		"valid":   parseBenchValid,
		"invalid": parseBenchInvalid,
	}
	for name, lines := range sets {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_, _ = Parse(lines[i%len(lines)], parseVocab)
				i++
			}
		})
	}
}

func BenchmarkParseDuration(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDuration("1d 12h 30m"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClosest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Closest("reqest", verbNames())
	}
}
