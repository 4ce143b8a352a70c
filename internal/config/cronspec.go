package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// checkSchedule checks a cron spec as the scheduler reads it (robfig/cron's
// standard parser): five fields — minute, hour, day of month, month, day
// of week — each "*", "?", a number or name, a range a-b, a list, any of
// them with a /step; or a descriptor (@yearly, @annually, @monthly,
// @weekly, @daily, @midnight, @hourly, @every <duration>); optionally
// after CRON_TZ=<zone> or TZ=<zone>. It returns "" or what is wrong.
func checkSchedule(spec string) string {
	s := strings.TrimSpace(spec)
	if s == "" {
		return "is empty; write a cron spec like \"*/10 * * * *\" (every 10 minutes)"
	}
	if rest, ok := cutAnyPrefix(s, "CRON_TZ=", "TZ="); ok {
		zone, after, _ := strings.Cut(rest, " ")
		if _, err := time.LoadLocation(zone); err != nil || zone == "" {
			return fmt.Sprintf("unknown time zone %q; use an IANA name like Europe/Berlin", zone)
		}
		s = strings.TrimSpace(after)
		if s == "" {
			return fmt.Sprintf("%q has a time zone but no schedule after it; write one like \"CRON_TZ=%s 0 9 * * 1-5\"", strings.TrimSpace(spec), zone)
		}
	}
	if strings.HasPrefix(s, "@") {
		return checkDescriptor(s)
	}
	fs := strings.Fields(s)
	if len(fs) != 5 {
		return fmt.Sprintf("has %d fields; a cron spec has 5: minute hour day-of-month month day-of-week, as in \"0 9 * * 1-5\"", len(fs))
	}
	for i, f := range fs {
		if msg := cronFields[i].check(f); msg != "" {
			return fmt.Sprintf("%s field %q: %s", cronFields[i].name, f, msg)
		}
	}
	return ""
}

func cutAnyPrefix(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return "", false
}

func checkDescriptor(s string) string {
	switch s {
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		return ""
	}
	if rest, ok := strings.CutPrefix(s, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d <= 0 {
			return fmt.Sprintf("@every needs a positive duration like 10m or 1h30m, not %q", strings.TrimSpace(rest))
		}
		return ""
	}
	return fmt.Sprintf("unknown descriptor %q; use @hourly, @daily, @weekly, @monthly, @yearly or @every <duration>", s)
}

// cronField is one of the five fields: its name, bounds and names.
type cronField struct {
	name     string
	lo, hi   int
	names    []string // names[i] stands for lo+i
	nameBase int
}

var (
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dayNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	cronFields = [5]cronField{
		{name: "minute", lo: 0, hi: 59},
		{name: "hour", lo: 0, hi: 23},
		{name: "day-of-month", lo: 1, hi: 31},
		{name: "month", lo: 1, hi: 12, names: monthNames, nameBase: 1},
		{name: "day-of-week", lo: 0, hi: 6, names: dayNames, nameBase: 0},
	}
)

func (f cronField) check(s string) string {
	for _, part := range strings.Split(s, ",") {
		if msg := f.checkRange(part); msg != "" {
			return msg
		}
	}
	return ""
}

func (f cronField) checkRange(s string) string {
	rng, step, stepped := strings.Cut(s, "/")
	if stepped {
		n, err := strconv.Atoi(step)
		if err != nil || n < 1 {
			return fmt.Sprintf("the step %q must be a whole number of at least 1", step)
		}
	}
	if rng == "*" || rng == "?" {
		return ""
	}
	a, b, isRange := strings.Cut(rng, "-")
	lo, msg := f.value(a)
	if msg != "" {
		return msg
	}
	if !isRange {
		return ""
	}
	hi, msg := f.value(b)
	if msg != "" {
		return msg
	}
	if hi < lo {
		return fmt.Sprintf("the range %s runs backwards", rng)
	}
	return ""
}

func (f cronField) value(s string) (int, string) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.nameBase + i, ""
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if len(f.names) > 0 {
			return 0, fmt.Sprintf("%q is not a number from %d to %d or a name like %s", s, f.lo, f.hi, f.names[0])
		}
		return 0, fmt.Sprintf("%q is not a number from %d to %d", s, f.lo, f.hi)
	}
	if v < f.lo || v > f.hi {
		return 0, fmt.Sprintf("%d is outside %d–%d", v, f.lo, f.hi)
	}
	return v, ""
}
