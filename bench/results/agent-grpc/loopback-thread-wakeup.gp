set terminal pngcairo size 1400,600 font ",10" noenhanced
set output "bench/results/agent-grpc/loopback-thread-wakeup.png"
set datafile missing "NaN"
set logscale xy
set format x "%.0s%cB"
set xlabel "tensor size (bytes)"
set grid
set key left top
set multiplot layout 1,2 title "loopback-thread-wakeup: rwin agent vs gRPC streaming (1 MiB chunks)"
set ylabel "bandwidth (MiB/s)"
plot "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 0 using 1:2 with linespoints title "gRPC push", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 1 using 1:2 with linespoints title "gRPC pull", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 2 using 1:2 with linespoints title "rwin put+flush", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 3 using 1:2 with linespoints title "rwin put_notify+flush", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 4 using 1:2 with linespoints title "rwin get"
set ylabel "p50 latency (us)"
plot "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 0 using 1:3 with linespoints title "gRPC push", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 1 using 1:3 with linespoints title "gRPC pull", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 2 using 1:3 with linespoints title "rwin put+flush", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 3 using 1:3 with linespoints title "rwin put_notify+flush", "bench/results/agent-grpc/loopback-thread-wakeup.dat" index 4 using 1:3 with linespoints title "rwin get"
unset multiplot
