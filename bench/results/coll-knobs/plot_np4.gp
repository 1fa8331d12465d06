set terminal pngcairo size 1500,950 font ",9" noenhanced dashed
set output "bench/results/coll-knobs/coll_time_np4.png"
set multiplot layout 2,3 title "rwin vs Open MPI vs OpenSHMEM, 4 ranks: time per call (us) (solid shm, dashed tcp, dotted rxe)"
set logscale xy
set format y "%g"
set format x "%.0s%cB"
set grid
set key left top
set xlabel "size (bytes, nccl-tests convention)"
set ylabel "time per call (us)"
set title "allreduce"
plot "bench/results/coll-knobs/plotdata/np4_allreduce_mpi_shm.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 1 pt 7 ps 0.5 title "mpi shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_mpi_tcp.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 2 pt 7 ps 0.5 title "mpi tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinbase_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinbase shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinbase_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinbase tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinchunk1m_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinchunk1m shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinchunk1m_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinslots8_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinslots8 shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinslots8_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinslots8 tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinzcchunk1m_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinzcopy_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcopy tcp"
set title "allgather"
plot "bench/results/coll-knobs/plotdata/np4_allgather_mpi_shm.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 1 pt 7 ps 0.5 title "mpi shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_mpi_tcp.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 2 pt 7 ps 0.5 title "mpi tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinbase_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinbase shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinbase_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinbase tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinchunk1m_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinchunk1m shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinchunk1m_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinslots8_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinslots8 shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinslots8_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinslots8 tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinzcchunk1m_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinzcopy_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcopy tcp"
set title "reduce_scatter"
plot NaN notitle
set title "all_to_all"
plot "bench/results/coll-knobs/plotdata/np4_all_to_all_mpi_shm.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 1 pt 7 ps 0.5 title "mpi shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_mpi_tcp.dat" using 1:2 with linespoints lc rgb "#1f77b4" dt 2 pt 7 ps 0.5 title "mpi tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinbase_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinbase shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinbase_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinbase tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinchunk1m_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinchunk1m shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinchunk1m_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinslots8_shm.dat" using 1:2 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinslots8 shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinslots8_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinslots8 tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinzcchunk1m_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinzcopy_tcp.dat" using 1:2 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcopy tcp"
set title "broadcast"
plot NaN notitle
unset multiplot
set terminal pngcairo size 1500,950 font ",9" noenhanced dashed
set output "bench/results/coll-knobs/coll_busbw_np4.png"
set multiplot layout 2,3 title "rwin vs Open MPI vs OpenSHMEM, 4 ranks: busbw (GB/s) (solid shm, dashed tcp, dotted rxe)"
set logscale xy
set format y "%g"
set format x "%.0s%cB"
set grid
set key left top
set xlabel "size (bytes, nccl-tests convention)"
set ylabel "busbw (GB/s)"
set title "allreduce"
plot "bench/results/coll-knobs/plotdata/np4_allreduce_mpi_shm.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 1 pt 7 ps 0.5 title "mpi shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_mpi_tcp.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 2 pt 7 ps 0.5 title "mpi tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinbase_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinbase shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinbase_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinbase tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinchunk1m_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinchunk1m shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinchunk1m_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinslots8_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinslots8 shm", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinslots8_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinslots8 tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinzcchunk1m_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allreduce_rwinzcopy_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcopy tcp"
set title "allgather"
plot "bench/results/coll-knobs/plotdata/np4_allgather_mpi_shm.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 1 pt 7 ps 0.5 title "mpi shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_mpi_tcp.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 2 pt 7 ps 0.5 title "mpi tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinbase_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinbase shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinbase_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinbase tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinchunk1m_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinchunk1m shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinchunk1m_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinslots8_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinslots8 shm", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinslots8_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinslots8 tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinzcchunk1m_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_allgather_rwinzcopy_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcopy tcp"
set title "reduce_scatter"
plot NaN notitle
set title "all_to_all"
plot "bench/results/coll-knobs/plotdata/np4_all_to_all_mpi_shm.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 1 pt 7 ps 0.5 title "mpi shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_mpi_tcp.dat" using 1:3 with linespoints lc rgb "#1f77b4" dt 2 pt 7 ps 0.5 title "mpi tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinbase_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinbase shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinbase_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinbase tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinchunk1m_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinchunk1m shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinchunk1m_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinslots8_shm.dat" using 1:3 with linespoints lc rgb "black" dt 1 pt 7 ps 0.5 title "rwinslots8 shm", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinslots8_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinslots8 tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinzcchunk1m_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcchunk1m tcp", \
     "bench/results/coll-knobs/plotdata/np4_all_to_all_rwinzcopy_tcp.dat" using 1:3 with linespoints lc rgb "black" dt 2 pt 7 ps 0.5 title "rwinzcopy tcp"
set title "broadcast"
plot NaN notitle
unset multiplot
