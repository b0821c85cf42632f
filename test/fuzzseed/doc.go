// Package fuzzseed gives fuzz targets their seeds. Every seed is added to
// the target at test time, so the current encodings are always tried; with
// FLOODGATE_WRITE_FUZZ_SEEDS=1 it is also written to the committed corpus,
// testdata/fuzz/<FuzzName>/<seed name>, where it stays as a regression
// input after the encoding moves on.
package fuzzseed
