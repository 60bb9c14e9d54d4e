import json, sys, statistics
d = json.load(open(sys.argv[1]))
runs = d['runs']
names = list(runs.keys())
print('contenders:', names)
svc = 'service'; ep = 'service [endpoint]'
base = [n for n in names if n.startswith('baseline')]
rows = []
for i, (a, b) in enumerate(zip(runs[svc], runs[ep])):
    row = [i + 1, a['requestsPerSecond'], b['requestsPerSecond'], round(b['requestsPerSecond'] / a['requestsPerSecond'], 3)]
    if base:
        c = runs[base[0]][i]
        row += [c['requestsPerSecond'], round(a['requestsPerSecond'] / c['requestsPerSecond'], 3)]
    rows.append(row)
for r in rows: print(r)
pr = [r[3] for r in rows]
print('endpoint/service pair ratios median', statistics.median(pr), 'min', min(pr), 'max', max(pr), 'below 0.90:', sum(1 for x in pr if x < 0.9))
best = d['best']
print('ratio of medians endpoint/service', round(best[ep]['requestsPerSecond'] / best[svc]['requestsPerSecond'], 3), best[ep]['requestsPerSecond'], best[svc]['requestsPerSecond'])
if base:
    b = best[base[0]]['requestsPerSecond']
    print('ratio of medians service/baseline', round(best[svc]['requestsPerSecond'] / b, 3), 'baseline', b)
    print('service/baseline pairs median', statistics.median([r[5] for r in rows]))
for lvl in d['levels']:
    f = lvl['figures']
    s = f[svc]['requestsPerSecond']; e = f[ep]['requestsPerSecond']
    extra = ''
    if base: extra = ' svc/base %.3f' % (s / f[base[0]]['requestsPerSecond'])
    print('level', lvl['connections'], 'ep/svc %.3f' % (e / s), extra)
for n in names:
    for i, r in enumerate(runs[n]):
        x = r.get('extra', {})
        print(n, i + 1, 'non2xx', sum(l['non2xx'] for l in r['levels']), 'answered', x.get('requests_answered'), 'stored', x.get('leads_stored'), 'once', x.get('every_event_delivered_once'), 'pending', x.get('deliveries_pending_at_load_end'), 'drain_s', round((x.get('drain_ms') or 0) / 1000, 1), 'rss', r['peakRssMb'])
