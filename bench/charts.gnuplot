# charts.gnuplot: one e2e run's chart, drawn by bench/run.
#   gnuplot -e "series='S.dat'; lat='L.dat'; out='X.png'; name='e2e'" bench/charts.gnuplot
# S.dat: "<second after due> <pushes>"; L.dat: "<label> <ms>" per percentile.
set terminal pngcairo size 1000,420 font ",10" noenhanced
set output out
set multiplot layout 1,2 title name
set title "pushes per second"
set xlabel "seconds after due_at"
set ylabel "pushes/s"
set grid
set style fill solid 0.6
set boxwidth 0.9
set xrange [0:*]
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
plot series using ($1+0.5):2 with boxes notitle lc rgb "#3060c0"
set title "due-to-delivery latency"
set xlabel "percentile"
set ylabel "ms"
set xrange [*:*]
set boxwidth 0.6
plot lat using 0:2:xtic(1) with boxes notitle lc rgb "#c06030"
unset multiplot
