import json,sys
lines=[json.loads(l) for l in open(sys.argv[1])]
dbs=set(k for l in lines for k in l['totals'])
for db in sorted(dbs):
    cpu_load=0;leads=0;cpu_idle=0;secs=0
    prev=None
    for l in lines:
        cur=l['totals'].get(db)
        if cur is None or 'leads' not in cur: prev=None; continue
        if prev is not None:
            dl=cur['leads']-prev['leads']; dc=(cur['service']-prev['service'])+(cur['postgres']-prev['postgres'])
            if dl>0: cpu_load+=dc; leads+=dl; secs+=1
            else: cpu_idle+=dc
        prev=cur
    if leads: print(f"{db}: {leads} leads in {secs} s with load; CPU (service+postgres) {cpu_load/100:.1f} s -> {cpu_load*10000/leads:.1f} us/lead; CPU in seconds without new leads (drain, idle) {cpu_idle/100:.1f} s")
