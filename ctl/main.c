/* heraldctl: the admin command line; everything is in libherald-ctl (ctl.h). */
#include "ctl.h"

int main(int argc, char **argv)
{
    return ctl_main(argc, argv);
}
