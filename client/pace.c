/* libo1client's use of the cadence predictor; see pace.h. */
#include "pace.h"

/* A spin for a due event ended at now_ns, with it (caught) or without. */
static void spin_end(struct o1_client_pace *p, uint64_t now_ns, int caught)
{
	if (!p->until_ns)
		return;
	p->spin_ns += now_ns > p->from_ns ? now_ns - p->from_ns : 0;
	p->caught += (uint64_t)caught;
	p->until_ns = 0;
}

void o1_client_pace_took(struct o1_client_pace *p, uint64_t now_ns, int slept)
{
	spin_end(p, now_ns, !slept);
	o1_cadence_post(&p->k, now_ns, 0);
}

int o1_client_pace_spin(struct o1_client_pace *p, uint64_t now_ns)
{
	if (!p->until_ns)
		return 0;
	if (now_ns < p->until_ns)
		return 1;
	spin_end(p, now_ns, 0);
	return 0;
}

int64_t o1_client_pace_sleep(struct o1_client_pace *p, uint64_t now_ns,
			     int64_t slice_ns)
{
	uint64_t until = 0, wake = o1_cadence_wake(&p->k, now_ns, &until);

	p->asked_ns = 0;
	if (!wake)
		return slice_ns;
	if (wake <= now_ns) {
		p->until_ns = until;
		p->from_ns = now_ns;
		return 0;
	}
	if ((uint64_t)slice_ns <= wake - now_ns)
		return slice_ns;
	p->asked_ns = wake;
	p->next_ns = until;
	return (int64_t)(wake - now_ns);
}

void o1_client_pace_woke(struct o1_client_pace *p, uint64_t now_ns,
			 int timed_out)
{
	if (!p->asked_ns)
		return;
	o1_cadence_woke(&p->k, p->asked_ns, now_ns);
	p->asked_ns = 0;
	if (timed_out && now_ns < p->next_ns) {
		p->until_ns = p->next_ns;
		p->from_ns = now_ns;
		p->wakes++;
	}
}
