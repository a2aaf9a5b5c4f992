// Package dev is skald dev: a local cluster of real skald server
// processes, and the kill and restart commands that drive it.
package dev
