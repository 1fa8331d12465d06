set terminal pngcairo size 1400,600 font ",10" noenhanced
set output "bench/results/agent-grpc/netns-thread.png"
set datafile separator ","
set logscale xy
set format x "%.0s%cB"
set xlabel "tensor size (bytes)"
set grid
set key left top
set multiplot layout 1,2 title "netns-thread: rwin agent vs gRPC streaming (1 MiB chunks)"
set ylabel "bandwidth (MiB/s)"
plot for [op in "push pull put+flush put_notify+flush get"] "bench/results/agent-grpc/netns-thread.csv" using 4:(strcol(3) eq op ? $9 : 1/0) with linespoints title op
set ylabel "p50 latency (us)"
plot for [op in "push pull put+flush put_notify+flush get"] "bench/results/agent-grpc/netns-thread.csv" using 4:(strcol(3) eq op && $5 > 0 ? $6 : 1/0) with linespoints title op
unset multiplot
