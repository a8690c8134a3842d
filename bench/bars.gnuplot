# bars.gnuplot: a bar chart of one to three values per label, drawn by
# bench/run for the firstpush (lag per run), rss (peak RSS per process after
# each campaign) and peer (CPU per push of each side) scenarios.
#   gnuplot -e "data='D.dat'; out='X.png'; name='rss'; ylabel='MiB'; cols=2; t1='200k'; t2='1M'" bench/bars.gnuplot
# D.dat: "<label> <value> [<value> [<value>]]" per bar (group).
set terminal pngcairo size 900,420 font ",10" noenhanced
set output out
set title name
set ylabel ylabel
set grid ytics
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.7 border -1
set boxwidth 0.9
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
set xtics rotate by -30 left
set key top left
if (cols == 3) {
    plot data using 2:xtic(1) title t1 lc rgb "#3060c0", '' using 3 title t2 lc rgb "#c06030", \
         '' using 4 title t3 lc rgb "#40a040"
} else { if (cols == 2) {
    plot data using 2:xtic(1) title t1 lc rgb "#3060c0", '' using 3 title t2 lc rgb "#c06030"
} else {
    plot data using 2:xtic(1) title t1 lc rgb "#3060c0"
} }
