package main

import (
	"flag"
	"time"
)

// durationValue is a flag.Value of a time.Duration whose error says what
// is wrong ("time: missing unit in duration \"30\""): the flag package's
// own duration flag says only "parse error".
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// durationFlag defines a duration flag on fs, as fs.Duration does; its
// help names the type, as fs.Duration's does.
func durationFlag(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	*p = value
	fs.Var((*durationValue)(p), name, usage+" (a `duration`: 500ms, 30s, 2m)")
	return p
}
