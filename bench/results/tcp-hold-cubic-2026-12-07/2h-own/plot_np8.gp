set terminal pngcairo size 1500,950 font ",9" noenhanced dashed
set output "coll_time_np8.png"
set multiplot layout 2,3 title "rwin vs Open MPI vs OpenSHMEM, 8 ranks: time per call (us) (solid shm, dashed tcp, dotted rxe)"
set logscale xy
set format y "%g"
set format x "%.0s%cB"
set grid
set key left top
set xlabel "size (bytes, nccl-tests convention)"
set ylabel "time per call (us)"
set title "allreduce"
plot "plotdata/np8_allreduce_mpi_2hosts.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_allreduce_mpi_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_allreduce_rwin_2hosts.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_allreduce_rwin_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "allgather"
plot "plotdata/np8_allgather_mpi_2hosts.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_allgather_mpi_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_allgather_rwin_2hosts.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_allgather_rwin_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "reduce_scatter"
plot "plotdata/np8_reduce_scatter_mpi_2hosts.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_reduce_scatter_mpi_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_reduce_scatter_rwin_2hosts.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_reduce_scatter_rwin_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "all_to_all"
plot "plotdata/np8_all_to_all_mpi_2hosts.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_all_to_all_mpi_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_all_to_all_rwin_2hosts.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_all_to_all_rwin_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "all_to_all_v"
plot NaN notitle
set title "broadcast"
plot "plotdata/np8_broadcast_mpi_2hosts.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_broadcast_mpi_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_broadcast_rwin_2hosts.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_broadcast_rwin_2hostsautoflat.dat" using 1:2 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
unset multiplot
set terminal pngcairo size 1500,950 font ",9" noenhanced dashed
set output "coll_busbw_np8.png"
set multiplot layout 2,3 title "rwin vs Open MPI vs OpenSHMEM, 8 ranks: busbw (GB/s) (solid shm, dashed tcp, dotted rxe)"
set logscale xy
set format y "%g"
set format x "%.0s%cB"
set grid
set key left top
set xlabel "size (bytes, nccl-tests convention)"
set ylabel "busbw (GB/s)"
set title "allreduce"
plot "plotdata/np8_allreduce_mpi_2hosts.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_allreduce_mpi_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_allreduce_rwin_2hosts.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_allreduce_rwin_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "allgather"
plot "plotdata/np8_allgather_mpi_2hosts.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_allgather_mpi_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_allgather_rwin_2hosts.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_allgather_rwin_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "reduce_scatter"
plot "plotdata/np8_reduce_scatter_mpi_2hosts.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_reduce_scatter_mpi_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_reduce_scatter_rwin_2hosts.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_reduce_scatter_rwin_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "all_to_all"
plot "plotdata/np8_all_to_all_mpi_2hosts.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_all_to_all_mpi_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_all_to_all_rwin_2hosts.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_all_to_all_rwin_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
set title "all_to_all_v"
plot NaN notitle
set title "broadcast"
plot "plotdata/np8_broadcast_mpi_2hosts.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hosts", \
     "plotdata/np8_broadcast_mpi_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 4 pt 7 ps 0.5 title "mpi 2hostsautoflat", \
     "plotdata/np8_broadcast_rwin_2hosts.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hosts", \
     "plotdata/np8_broadcast_rwin_2hostsautoflat.dat" using 1:3 with linespoints lc rgb "#d62728" dt 4 pt 7 ps 0.5 title "rwin 2hostsautoflat"
unset multiplot
