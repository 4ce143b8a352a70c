package allocator

import (
	"testing"
	"time"
)

// TestBurstStart: work that has arrived slowly for hours and then in a
// burst over the last five minutes has been "arriving" for those five
// minutes; work arriving steadily, since its first arrival.
func TestBurstStart(t *testing.T) {
	now := t0
	var samples []ArrivalSample
	for i := range 4 { // one an hour, 4h ago … 1h ago
		samples = append(samples, ArrivalSample{At: now.Add(-time.Duration(4-i) * time.Hour), Queue: "a", Priority: 1, GPUHours: 1})
	}
	for i := range 50 { // 50 in the last 5 minutes
		samples = append(samples, ArrivalSample{At: now.Add(-5*time.Minute + time.Duration(i)*6*time.Second), Queue: "a", Priority: 1, GPUHours: 1})
	}
	got := LearnArrivals(samples, now, 24*time.Hour)
	if len(got) != 1 || got[0].Over != 5*time.Minute {
		t.Errorf("a burst after a slow start: %+v; want Over 5m", got)
	}
	var steady []ArrivalSample
	for i := range 54 { // one every 4 minutes or so, for 3.6 hours
		steady = append(steady, ArrivalSample{At: now.Add(-time.Duration(i) * 4 * time.Minute), Queue: "a", Priority: 1, GPUHours: 1})
	}
	got = LearnArrivals(steady, now, 24*time.Hour)
	if len(got) != 1 || got[0].Over != 53*4*time.Minute {
		t.Errorf("steady: %+v; want Over since the first, %v", got, 53*4*time.Minute)
	}
	// A burst that has stopped (slow since): no later rise to wait out.
	var fell []ArrivalSample
	for i := range 50 {
		fell = append(fell, ArrivalSample{At: now.Add(-4*time.Hour + time.Duration(i)*time.Second), Queue: "a", Priority: 1, GPUHours: 1})
	}
	got = LearnArrivals(append(fell, ArrivalSample{At: now.Add(-time.Hour), Queue: "a", Priority: 1, GPUHours: 1}), now, 24*time.Hour)
	if len(got) != 1 || got[0].Over != 4*time.Hour {
		t.Errorf("a burst long over: %+v; want Over since the first, 4h", got)
	}
}

// TestBurstStartEvidence: a slight rise (gaps of 5 minutes, then of 4)
// is not a burst: it is not burstEvidence more likely than one steady
// rate, so the work has been arriving since the first of it.
func TestBurstStartEvidence(t *testing.T) {
	var ts []time.Time
	at := t0.Add(-4 * time.Hour)
	for i := range 50 {
		ts = append(ts, at)
		at = at.Add(5 * time.Minute)
		if i >= 25 {
			at = at.Add(-time.Minute)
		}
	}
	if got := burstStart(ts, ts[0], ts[len(ts)-1]); !got.Equal(ts[0]) {
		t.Errorf("a slight rise: burst began %v; want the first arrival, %v", got, ts[0])
	}
	if got := burstStart(nil, t0, t0); !got.Equal(t0) {
		t.Errorf("no arrivals: %v; want now", got)
	}
	if got := burstStart(ts[:1], ts[0], t0); !got.Equal(ts[0]) {
		t.Errorf("one arrival: %v; want it", got)
	}
}

// TestBurstStartThreshold pins burstEvidence between 2.53 and 3.70 nats:
// twelve arrivals five minutes apart, then arrivals 30 s apart. With two
// of those the best change point (the twelfth arrival) is 2.53 nats more
// likely than one steady rate: not a burst. With three it is 3.70: the
// burst began at the twelfth arrival.
func TestBurstStartThreshold(t *testing.T) {
	arrivals := func(fast int) []time.Time {
		var ts []time.Time
		for i := range 12 {
			ts = append(ts, t0.Add(time.Duration(i)*5*time.Minute))
		}
		for k := range fast {
			ts = append(ts, ts[11].Add(time.Duration(k+1)*30*time.Second))
		}
		return ts
	}
	two, three := arrivals(2), arrivals(3)
	if got := burstStart(two, two[0], two[len(two)-1]); !got.Equal(two[0]) {
		t.Errorf("two fast arrivals (2.53 nats): burst began %v; want none, the first arrival %v", got, two[0])
	}
	if got := burstStart(three, three[0], three[len(three)-1]); !got.Equal(three[11]) {
		t.Errorf("three fast arrivals (3.70 nats): burst began %v; want the twelfth arrival %v", got, three[11])
	}
}
