package commands

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// durationError is what is wrong with a duration, and maybe a correction.
type durationError struct {
	msg, suggest string
}

// ParseDuration parses a gpubot duration: a number and a unit, or several
// from days to minutes, as in "90m", "6h", "2d", "1h30m", "1d12h", "45min",
// "2hours", "2 hours", "1h 30m" or "1.5h". Units are m, min, mins, minute,
// minutes, h, hr, hrs, hour, hours, d, day and days, in any case. The result
// is rounded to the minute. It rejects a missing unit, units out of order,
// zero, negative durations and durations over 366 days.
func ParseDuration(s string) (time.Duration, error) {
	sec, err := scanDuration(s)
	if err == nil {
		var d time.Duration
		if d, err = checkDuration(sec); err == nil {
			return d, nil
		}
	}
	msg := err.msg
	if err.suggest != "" {
		msg += " (did you mean " + err.suggest + "?)"
	}
	return 0, fmt.Errorf("invalid duration %q: %s", s, msg)
}

// scanDuration reads the syntax of a duration and returns its length in
// whole seconds, saturated far above the 366-day limit.
func scanDuration(s string) (int64, *durationError) {
	i := skipSpace(s, 0)
	if i < len(s) && s[i] == '-' {
		return 0, &durationError{msg: "negative durations are not allowed"}
	}
	if i < len(s) && s[i] == '+' {
		i++
	}
	var total int64
	prevRank, parts := 4, 0
	for {
		if i = skipSpace(s, i); i == len(s) {
			break
		}
		numStart := i
		var whole, frac, fracDen int64 = 0, 0, 1
		for ; i < len(s) && isDigit(s[i]); i++ {
			whole = min(whole*10+int64(s[i]-'0'), 1e12)
		}
		digits := i - numStart
		if i < len(s) && s[i] == '.' {
			for i++; i < len(s) && isDigit(s[i]); i++ {
				if fracDen < 1e9 {
					frac, fracDen = frac*10+int64(s[i]-'0'), fracDen*10
				}
				digits++
			}
		}
		if digits == 0 {
			return 0, &durationError{msg: "expected a number, as in 4h"}
		}
		num := s[numStart:i]
		i = skipSpace(s, i)
		unitStart := i
		for i < len(s) {
			r, w := utf8.DecodeRuneInString(s[i:])
			if isDigit(s[i]) || r == '.' || isSpace(r) {
				break
			}
			i += w
		}
		unit := s[unitStart:i]
		if unit == "" {
			e := &durationError{msg: "missing unit (m, h or d)"}
			if parts == 0 && isDigits(num) && skipSpace(s, i) == len(s) {
				e.suggest = num + "h"
			}
			return 0, e
		}
		sec, rank := unitSeconds(unit)
		if rank == 0 {
			return 0, &durationError{msg: "unknown unit " + quoteWord(unit) + " (use m, h or d)"}
		}
		if rank >= prevRank {
			return 0, &durationError{msg: "put units from largest to smallest, each once, as in 1d12h"}
		}
		prevRank = rank
		total += whole*sec + frac*sec/fracDen
		parts++
	}
	if parts == 0 {
		return 0, &durationError{msg: "expected a number, as in 4h"}
	}
	return total, nil
}

// checkDuration rounds sec to the minute and checks the limits.
func checkDuration(sec int64) (time.Duration, *durationError) {
	minutes := (sec + 30) / 60
	switch {
	case sec == 0:
		return 0, &durationError{msg: "must be more than zero"}
	case minutes == 0:
		return 0, &durationError{msg: "must be at least 1m"}
	case time.Duration(minutes) > maxDuration/time.Minute:
		return 0, &durationError{msg: "must be at most 366 days"}
	}
	return time.Duration(minutes) * time.Minute, nil
}

// unitSeconds returns the length and rank (3 days, 2 hours, 1 minutes) of
// a unit, and rank 0 for an unknown one.
func unitSeconds(unit string) (int64, int) {
	switch {
	case isOneOf(unit, []string{"m", "min", "mins", "minute", "minutes"}):
		return 60, 1
	case isOneOf(unit, []string{"h", "hr", "hrs", "hour", "hours"}):
		return 3600, 2
	case isOneOf(unit, dayWords):
		return 86400, 3
	}
	return 0, 0
}

var dayWords = []string{"d", "day", "days"}

func isUnit(word string) bool { _, rank := unitSeconds(word); return rank > 0 }

// durationish reports whether a word can be (part of) a duration.
func durationish(word string) bool {
	return word != "" && (isDigit(word[0]) || strings.IndexByte("+-.", word[0]) >= 0 || isUnit(word))
}
