package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc/grpclog"
)

// routeLibraryLogs sends what libraries log on their own into log, in its
// format (text or JSON), instead of their plain lines on stderr: the
// standard log package's, gRPC's and OpenTelemetry's (a failed trace
// export, for one). Raft's and memberlist's are routed where they are
// configured (cluster).
func routeLibraryLogs(log *slog.Logger) {
	slog.SetDefault(log) // the log package writes through log too, at INFO
	grpclog.SetLoggerV2(grpcLogger{log: log})
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: " + err.Error())
	}))
}

// grpcLogger is grpclog.LoggerV2 on slog, lines prefixed "grpc: ". gRPC's
// info and warnings are its routine chatter (connections come and go):
// debug; its errors stay errors.
type grpcLogger struct{ log *slog.Logger }

var _ grpclog.LoggerV2 = grpcLogger{}

func (g grpcLogger) out(level slog.Level, msg string) {
	g.log.Log(context.Background(), level, "grpc: "+strings.TrimSuffix(msg, "\n"))
}

func (g grpcLogger) Info(args ...any)   { g.out(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any) { g.out(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Infof(format string, args ...any) {
	g.out(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Warning(args ...any)   { g.out(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any) { g.out(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.out(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.out(slog.LevelError, fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any) { g.out(slog.LevelError, fmt.Sprintln(args...)) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.out(slog.LevelError, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Fatal(args ...any)                 { g.fatal(fmt.Sprint(args...)) }
func (g grpcLogger) Fatalln(args ...any)               { g.fatal(fmt.Sprintln(args...)) }
func (g grpcLogger) Fatalf(format string, args ...any) { g.fatal(fmt.Sprintf(format, args...)) }

// V reports whether gRPC's info of verbosity l is wanted: level 0 (gRPC's
// default) when debugging, never its more verbose levels.
func (g grpcLogger) V(l int) bool {
	return l <= 0 && g.log.Enabled(context.Background(), slog.LevelDebug)
}

func (g grpcLogger) fatal(msg string) {
	g.out(slog.LevelError, msg)
	os.Exit(1)
}
