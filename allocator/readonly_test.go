package allocator

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

// TestReadsFillNoCache: Capacity and Standing leave a snapshot exactly as
// they found it, caches and all, and run on one snapshot from several
// goroutines at once (under -race), as the command service's reads do on
// a view's snapshot.
func TestReadsFillNoCache(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 41))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			want := s.Clone()
			want.scratch, want.shadows = s.scratch, s.shadows // not cloned
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					s.Capacity(Mix{1: 2, 8: 1})
					s.Capacity(nil)
					s.Standing()
				})
			}
			wg.Wait()
			if !reflect.DeepEqual(want, s) {
				t.Fatalf("Capacity or Standing changed the snapshot:\n%s", cmpDiff(viewOf(want), viewOf(s)))
			}
		})
	}
}
