# Bandwidth and latency against message size from bench/compare.sh (series written by combine.py).
#   gnuplot -e "dir='bench/results/XYZ'" bench/plot.gp   -> dir/compare.png
if (!exists("dir")) dir = "."
set terminal pngcairo size 1400,1000 font ",10" noenhanced
set output dir."/compare.png"
set logscale xy
set format x "%.0s%cB"
set xlabel "message size (bytes)"
set grid
set key left top
load dir."/plot_cmds.gp"
