// Package rig holds what the multi-process benchmark harnesses under bench/
// share: markdown tables written as they grow, and the small statistics and
// formatting helpers their rows use.
//
// A harness makes one Table per result table with NewTable, passing the
// writer and the mutex that guard its output, and adds rows with Row as
// cells are measured. Quantile, FirstFew, Secs and MiB turn measurements
// into cells.
package rig
