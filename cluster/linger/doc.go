// Package linger decides how long a group commit (a Raft group's batcher,
// a forward queue) waits before it sends its next batch, for the callers
// of the batch it just answered to come back.
//
// A batcher with one batch in flight sends whatever queued meanwhile the
// moment that batch is answered. Under a steady load from a fixed set of
// callers (a service's worker pool, a load tool's 64 connections), the
// callers then split into two cohorts that take turns: the one that was
// answered is on its way back while the other goes out, and every batch
// carries half of them. Each batch costs the same Raft round trip, disk
// flushes and wakeups on every replica whatever it carries, so half-full
// batches cost twice the CPU per check. Waiting, for at most as long as
// the last batch took, until the checks queued reach most of those seen
// in circulation merges the cohorts; under a light load (small batches)
// nothing waits, and a wait never outlasts the time the last batch took
// since it was answered.
package linger
